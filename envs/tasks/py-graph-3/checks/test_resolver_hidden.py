import random
import unittest

from resolver.components import connected_components, same_component
from resolver.errors import CycleError, MissingPackage
from resolver.install import install_order


def reference_components(edges, nodes):
    adj = {n: set() for n in nodes}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    seen, out = set(), []
    for start in adj:
        if start in seen:
            continue
        comp, stack = [], [start]
        seen.add(start)
        while stack:
            n = stack.pop()
            comp.append(n)
            for m in adj[n]:
                if m not in seen:
                    seen.add(m)
                    stack.append(m)
        out.append(sorted(comp))
    return sorted(out)


class TestComponentsHidden(unittest.TestCase):
    def test_join_through_non_root(self):
        edges = [(1, 2), (3, 4), (4, 5), (2, 5), (6, 7), (8, 7)]
        self.assertEqual(connected_components(edges), [[1, 2, 3, 4, 5], [6, 7, 8]])

    def test_chain_in_reverse(self):
        edges = [("m", "n"), ("o", "n"), ("p", "o"), ("q", "p"), ("n", "z")]
        self.assertEqual(connected_components(edges, nodes=["solo"]), [["m", "n", "o", "p", "q", "z"], ["solo"]])
        self.assertTrue(same_component(edges, "m", "q"))

    def test_random_graphs(self):
        rng = random.Random(20240601)
        for _ in range(40):
            nodes = list(range(rng.randint(5, 30)))
            edges = [(rng.choice(nodes), rng.choice(nodes)) for _ in range(rng.randint(0, 30))]
            self.assertEqual(connected_components(edges, nodes), reference_components(edges, nodes))


INDEX = {
    "site": ["theme", "cms", "cache"],
    "cms": ["orm", "auth", "cache"],
    "theme": ["assets"],
    "auth": ["crypto", "orm"],
    "orm": ["driver"],
    "cache": ["driver"],
    "assets": [],
    "crypto": [],
    "driver": [],
    "cli": ["auth", "fmt"],
    "fmt": [],
}


class TestInstallHidden(unittest.TestCase):
    def test_order(self):
        self.assertEqual(install_order(INDEX, ["site"]),
                         ["assets", "theme", "driver", "orm", "crypto", "auth", "cache", "cms", "site"])

    def test_shared_requirements_once(self):
        self.assertEqual(install_order(INDEX, ["cli", "cache", "fmt"]),
                         ["crypto", "driver", "orm", "auth", "fmt", "cli", "cache"])

    def test_cycle_below_target(self):
        index = {"top": ["x"], "x": ["y"], "y": ["w", "x"], "w": []}
        with self.assertRaises(CycleError) as cm:
            install_order(index, ["top"])
        self.assertEqual(cm.exception.path, ["x", "y", "x"])

    def test_self_requirement(self):
        with self.assertRaises(CycleError) as cm:
            install_order({"loop": ["loop"]}, ["loop"])
        self.assertEqual(cm.exception.path, ["loop", "loop"])

    def test_cycle_reached_from_second_target(self):
        index = {"ok": ["base"], "base": [], "bad": ["base", "r1"], "r1": ["r2"], "r2": ["r1"]}
        with self.assertRaises(CycleError) as cm:
            install_order(index, ["ok", "bad"])
        self.assertEqual(cm.exception.path, ["r1", "r2", "r1"])

    def test_missing_deep(self):
        with self.assertRaises(MissingPackage):
            install_order({"a": ["b"], "b": ["c"]}, ["a"])
