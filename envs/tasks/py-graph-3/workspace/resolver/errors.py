class ResolveError(Exception):
    pass


class MissingPackage(ResolveError, KeyError):
    """A required package is not in the index."""


class CycleError(ResolveError):
    """Requirements loop.  ``path`` runs from the repeated package back to itself,
    e.g. ["b", "c", "b"]."""

    def __init__(self, path):
        super().__init__(" -> ".join(path))
        self.path = path
