import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from resolver import CycleError, MissingPackage, connected_components, install_order, parse_index

INDEX = """
app: web, db
web: http, log
db: log
http:
log:
"""


class TestComponents(unittest.TestCase):
    def test_components(self):
        edges = [("a", "b"), ("c", "d"), ("d", "b"), ("e", "f")]
        self.assertEqual(connected_components(edges, nodes=["g"]),
                         [["a", "b", "c", "d"], ["e", "f"], ["g"]])


class TestInstall(unittest.TestCase):
    def test_diamond(self):
        self.assertEqual(install_order(parse_index(INDEX), ["app"]), ["http", "log", "web", "db", "app"])

    def test_missing(self):
        with self.assertRaises(MissingPackage):
            install_order({"a": ["zzz"]}, ["a"])

    def test_cycle(self):
        with self.assertRaises(CycleError) as cm:
            install_order({"a": ["b"], "b": ["a"]}, ["a"])
        self.assertEqual(cm.exception.path, ["a", "b", "a"])


if __name__ == "__main__":
    unittest.main()
