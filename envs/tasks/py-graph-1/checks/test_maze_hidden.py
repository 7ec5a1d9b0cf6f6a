import unittest

from maze.graph import Graph
from maze.search import distance, shortest_path

EDGES = [("gate", "hall"), ("hall", "well"), ("well", "keep"), ("gate", "yard"),
         ("yard", "barn"), ("barn", "keep"), ("keep", "tower"), ("moat", "gate")]


class TestMazeHidden(unittest.TestCase):
    def setUp(self):
        self.g = Graph(EDGES)

    def test_forward(self):
        self.assertEqual(shortest_path(self.g, "moat", "tower"), ["moat", "gate", "hall", "well", "keep", "tower"])

    def test_backward_edges(self):
        self.assertEqual(shortest_path(self.g, "tower", "yard"), ["tower", "keep", "barn", "yard"])

    def test_symmetry(self):
        self.assertEqual(self.g.neighbors("keep"), ["barn", "tower", "well"])
        self.assertEqual(distance(self.g, "barn", "hall"), 3)
        self.assertEqual(distance(self.g, "hall", "barn"), 3)

    def test_unreachable_and_unknown(self):
        self.g.add_edge("island", "rock")
        self.assertIsNone(shortest_path(self.g, "gate", "rock"))
        self.assertEqual(shortest_path(self.g, "rock", "island"), ["rock", "island"])
        self.assertEqual(distance(self.g, "gate", "nowhere"), -1)
