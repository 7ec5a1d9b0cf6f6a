import hashlib
import json
import os
import unittest


def read(path):
    with open(path) as f:
        return f.read()


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


EXPECTED = {'grand_total': 19342, 'group_by': 'region', 'measure': 'revenue', 'rows': 10, 'totals': {'east': 6899, 'north': 3798, 'south': 3150, 'west': 5495}}
SALES_SHA256 = '59bdcec543cf0c146b8bc2221f6031aeb0f7ccd316f58eef9c5d0009d3ca0c52'


class TestReport(unittest.TestCase):
    def test_report(self):
        self.assertEqual(json.loads(read("output/report.json")), EXPECTED)

    def test_only_the_report(self):
        self.assertEqual(sorted(os.listdir("output")), ["report.json"])

    def test_export_untouched(self):
        self.assertEqual(sha256("data/sales.csv"), SALES_SHA256)
        self.assertEqual(sorted(os.listdir("data")), ["sales.csv"])

    def test_config_groups_by_region(self):
        config = json.loads(read("config/report.json"))
        self.assertEqual(config["group_by"], "region")
        self.assertEqual(config["measure"], "revenue")


if __name__ == "__main__":
    unittest.main()
