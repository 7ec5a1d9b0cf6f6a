import unittest

import jmespath


class TestStringFunctions(unittest.TestCase):
    def test_ends_with(self):
        data = {"name": "jackson"}
        self.assertTrue(jmespath.search("ends_with(name, 'son')", data))
        self.assertFalse(jmespath.search("ends_with(name, 'jack')", data))

    def test_starts_with(self):
        data = {"name": "jackson"}
        self.assertTrue(jmespath.search("starts_with(name, 'jack')", data))
        self.assertFalse(jmespath.search("starts_with(name, 'son')", data))

    def test_reverse(self):
        self.assertEqual(jmespath.search("reverse(@)", [1, 2, 3]), [3, 2, 1])
        self.assertEqual(jmespath.search("reverse(@)", "abc"), "cba")
