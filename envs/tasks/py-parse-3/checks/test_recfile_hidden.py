import unittest

from recfile.fields import split_fields
from recfile.reader import read_records


class TestDoubledQuotes(unittest.TestCase):
    def test_only_a_quote(self):
        self.assertEqual(split_fields('""""'), ['"'])

    def test_empty_quoted(self):
        self.assertEqual(split_fields('"",z'), ["", "z"])

    def test_other_separator(self):
        self.assertEqual(split_fields('x;"p;q"; "r""s" ;t', sep=";"), ["x", "p;q", 'r"s', "t"])

    def test_still_rejected(self):
        for bad in ['"a"b,c', '"a""', '"x""y']:
            with self.assertRaises(ValueError):
                split_fields(bad)


class TestBlankLines(unittest.TestCase):
    TEXT = 'id,note\n\n1,"one, two"\n   \n# skip me\n\t\n2,"he said ""no"""\n\n'

    def test_records(self):
        self.assertEqual(read_records(self.TEXT),
                         [{"id": "1", "note": "one, two"}, {"id": "2", "note": 'he said "no"'}])

    def test_blank_before_header(self):
        self.assertEqual(read_records("\n  \ncode;qty\nA1;4\n", sep=";"), [{"code": "A1", "qty": "4"}])

    def test_field_count_error_line(self):
        with self.assertRaises(ValueError) as ctx:
            read_records("a,b\n\n1,2\n \n3\n")
        self.assertIn("line 5", str(ctx.exception))
