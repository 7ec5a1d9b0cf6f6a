import unittest

from pipeline.errors import CycleError
from pipeline.spec import parse_spec
from pipeline.toposort import toposort

SPEC = """
deploy: image migrate
image: fetch   compile
  # a comment-only line

migrate: fetch
image: fetch vendor   # repeated rule, 'fetch' already listed
deploy: smoke
smoke: image
"""


class TestParseHidden(unittest.TestCase):
    def test_rules_accumulate_without_duplicates(self):
        self.assertEqual(parse_spec(SPEC), {
            "deploy": ["image", "migrate", "smoke"],
            "image": ["fetch", "compile", "vendor"],
            "migrate": ["fetch"],
            "smoke": ["image"],
        })

    def test_task_listed_as_prereq_of_itself_elsewhere(self):
        self.assertEqual(parse_spec("a: b\nb: c\na: c b\n"), {"a": ["b", "c"], "b": ["c"]})

    def test_empty_rule(self):
        self.assertEqual(parse_spec("lint:\nlint: fmt\n"), {"lint": ["fmt"]})


class TestToposortHidden(unittest.TestCase):
    def test_order_from_spec(self):
        self.assertEqual(toposort(parse_spec(SPEC)),
                         ["compile", "fetch", "migrate", "vendor", "image", "smoke", "deploy"])

    def test_cycle_hidden_by_leaves(self):
        deps = {"x": ["y"], "y": ["z"], "z": ["x"], "app": ["lib1", "lib2", "lib3"]}
        with self.assertRaises(CycleError) as cm:
            toposort(deps)
        self.assertEqual(cm.exception.nodes, ["x", "y", "z"])

    def test_cycle_blocks_dependents(self):
        deps = {"p": ["q"], "q": ["p"], "r": ["q", "s1"], "t": ["s2"], "u": ["s3"]}
        with self.assertRaises(CycleError) as cm:
            toposort(deps)
        self.assertEqual(cm.exception.nodes, ["p", "q", "r"])

    def test_self_loop(self):
        with self.assertRaises(CycleError) as cm:
            toposort({"solo": ["solo"], "a": ["b"], "c": ["d"]})
        self.assertEqual(cm.exception.nodes, ["solo"])
