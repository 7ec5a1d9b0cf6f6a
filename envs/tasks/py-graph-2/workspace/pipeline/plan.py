"""Command-line style helper: spec text in, run order out."""
from .spec import parse_spec
from .toposort import toposort


def plan(text):
    """Return the run order for a spec, as a list of task names."""
    return toposort(parse_spec(text))
