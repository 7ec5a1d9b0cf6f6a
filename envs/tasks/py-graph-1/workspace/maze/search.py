"""Breadth-first search."""
from collections import deque


def shortest_path(graph, start, goal):
    """Return a shortest path [start, ..., goal] as a list of nodes, or None.

    Neighbours are explored in sorted order, so among equally short paths the
    one found first is returned.
    """
    if start == goal:
        return [start]
    came_from = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in graph.neighbors(node):
            if nxt in came_from:
                continue
            came_from[nxt] = node
            if nxt == goal:
                return _trace(came_from, goal)
            queue.append(nxt)
    return None


def _trace(came_from, node):
    path = []
    while node is not None:
        path.append(node)
        node = came_from[node]
    return path


def distance(graph, start, goal):
    """Number of edges on a shortest path, or -1 when goal is unreachable."""
    path = shortest_path(graph, start, goal)
    return -1 if path is None else len(path) - 1
