"""Parse pipeline specs.

A spec has one rule per line::

    build: compile assets   # comments run to the end of the line
    test: build
    lint:

The task before the colon depends on the tasks after it.  A task may have
several rules; their prerequisites accumulate in the order first seen and a
prerequisite is never listed twice.  Blank lines and comment-only lines are
ignored.
"""
from .errors import SpecError


def parse_spec(text):
    """Return {task: [prerequisite, ...]} for the rules in ``text``."""
    deps = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        task, colon, rest = line.partition(":")
        task = task.strip()
        if not colon or not task or " " in task:
            raise SpecError(f"line {lineno}: {raw!r}")
        deps[task] = rest.split()
    return deps
