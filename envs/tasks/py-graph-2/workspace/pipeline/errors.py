class SpecError(ValueError):
    """A line of a pipeline spec could not be parsed."""


class CycleError(Exception):
    """The tasks in ``nodes`` (sorted) could not be ordered because of a cycle."""

    def __init__(self, nodes):
        super().__init__("cycle among: " + ", ".join(nodes))
        self.nodes = nodes
