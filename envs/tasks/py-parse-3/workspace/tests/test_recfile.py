import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from recfile import read_records, split_fields, typed


class TestFields(unittest.TestCase):
    def test_quoted_separator(self):
        self.assertEqual(split_fields('a, "b,c" ,d'), ["a", "b,c", "d"])

    def test_doubled_quote(self):
        self.assertEqual(split_fields('"say ""hi""",x'), ['say "hi"', "x"])

    def test_unterminated(self):
        with self.assertRaises(ValueError):
            split_fields('"open,end')


class TestReader(unittest.TestCase):
    def test_trailing_newline(self):
        self.assertEqual(read_records("name,qty\napple,3\n"), [{"name": "apple", "qty": "3"}])

    def test_typed(self):
        records = read_records("# stock\nname,qty\npear,\nplum,12")
        self.assertEqual(typed(records, {"qty": int}),
                         [{"name": "pear", "qty": None}, {"name": "plum", "qty": 12}])


if __name__ == "__main__":
    unittest.main()
