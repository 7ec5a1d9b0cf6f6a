from .errors import CycleError, SpecError
from .plan import plan
from .spec import parse_spec
from .toposort import toposort

__all__ = ["CycleError", "SpecError", "parse_spec", "plan", "toposort"]
