import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipeline import CycleError, SpecError, parse_spec, plan, toposort

SPEC = """
# release pipeline
package: build docs
build: compile   # compile first
test: build
package: test
"""


class TestParse(unittest.TestCase):
    def test_accumulates(self):
        self.assertEqual(parse_spec(SPEC), {"package": ["build", "docs", "test"], "build": ["compile"], "test": ["build"]})

    def test_bad_line(self):
        with self.assertRaises(SpecError):
            parse_spec("just words")


class TestToposort(unittest.TestCase):
    def test_order(self):
        self.assertEqual(plan(SPEC), ["compile", "build", "docs", "test", "package"])

    def test_simple_cycle(self):
        with self.assertRaises(CycleError) as cm:
            toposort({"a": ["b"], "b": ["a"]})
        self.assertEqual(cm.exception.nodes, ["a", "b"])


if __name__ == "__main__":
    unittest.main()
