import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kvconf import parse_config

SAMPLE = """# service settings
name = demo

port = 8080
    # retries used to be 5
retries = -2
verbose = TRUE
"""


class TestParseConfig(unittest.TestCase):
    def test_sample(self):
        self.assertEqual(
            parse_config(SAMPLE),
            {"name": "demo", "port": 8080, "retries": -2, "verbose": True},
        )

    def test_whitespace_only_line(self):
        self.assertEqual(parse_config("a = 1\n   \nb = two\n"), {"a": 1, "b": "two"})

    def test_bad_line(self):
        with self.assertRaises(ValueError):
            parse_config("a = 1\njust words\n")


if __name__ == "__main__":
    unittest.main()
