import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from maze import Graph, distance, shortest_path


class TestShortestPath(unittest.TestCase):
    def setUp(self):
        self.g = Graph([(1, 2), (2, 3), (3, 4), (1, 5), (5, 4)])

    def test_path(self):
        self.assertEqual(shortest_path(self.g, 1, 4), [1, 5, 4])

    def test_same_node(self):
        self.assertEqual(shortest_path(self.g, 3, 3), [3])

    def test_distance(self):
        self.assertEqual(distance(self.g, 1, 3), 2)

    def test_unreachable(self):
        self.g.add_node(9)
        self.assertIsNone(shortest_path(self.g, 1, 9))


if __name__ == "__main__":
    unittest.main()
