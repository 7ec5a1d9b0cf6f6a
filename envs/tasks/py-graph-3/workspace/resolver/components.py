"""Connected components of an undirected graph."""
from .unionfind import DisjointSet


def connected_components(edges, nodes=()):
    """Return the components as sorted lists, ordered by their smallest member.

    ``edges`` are (a, b) pairs; ``nodes`` may add isolated nodes.
    """
    ds = DisjointSet()
    for n in nodes:
        ds.add(n)
    for a, b in edges:
        ds.union(a, b)
    groups = {}
    for n in ds.items():
        groups.setdefault(ds.find(n), []).append(n)
    return sorted(sorted(g) for g in groups.values())


def same_component(edges, a, b):
    ds = DisjointSet()
    for x, y in edges:
        ds.union(x, y)
    return a in ds and b in ds and ds.find(a) == ds.find(b)
