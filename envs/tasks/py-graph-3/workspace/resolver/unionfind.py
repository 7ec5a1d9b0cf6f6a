"""Disjoint-set forest (union by size, path compression)."""


class DisjointSet:
    def __init__(self):
        self._parent = {}
        self._size = {}

    def add(self, x):
        if x not in self._parent:
            self._parent[x] = x
            self._size[x] = 1

    def __contains__(self, x):
        return x in self._parent

    def items(self):
        return list(self._parent)

    def find(self, x):
        """Representative of the set containing ``x`` (added on first use)."""
        self.add(x)
        root = x
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[x] != root:
            self._parent[x], x = root, self._parent[x]
        return root

    def union(self, a, b):
        """Merge the sets of ``a`` and ``b``; returns the new representative."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if self._size[ra] < self._size[rb]:
            ra, rb = rb, ra
        self._parent[b] = ra
        self._size[ra] += self._size[rb]
        return ra
