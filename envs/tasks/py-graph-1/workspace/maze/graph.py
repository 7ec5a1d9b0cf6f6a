"""Undirected graphs stored as adjacency sets."""


class Graph:
    def __init__(self, edges=()):
        self._adj = {}
        for a, b in edges:
            self.add_edge(a, b)

    def add_node(self, node):
        self._adj.setdefault(node, set())

    def add_edge(self, a, b):
        """Connect ``a`` and ``b`` (the graph is undirected)."""
        self.add_node(a)
        self.add_node(b)
        self._adj[a].add(b)

    def nodes(self):
        return sorted(self._adj)

    def neighbors(self, node):
        """Neighbours of ``node`` in sorted order (empty for unknown nodes)."""
        return sorted(self._adj.get(node, ()))
