import os
import subprocess
import tempfile
import unittest

WS = os.getcwd()  # the checks run with cwd /workspace
SCRIPT = os.path.join(WS, "csvsum.sh")
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def csvsum(*args):
    return subprocess.run(["/bin/bash", SCRIPT, *args], capture_output=True, text=True, env=ENV, timeout=20)


class TestCsvSum(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_exact_header_match(self):
        p = self.write("orders.csv", "net-price,price,count\n1.10,2.20,3\n4.40,5.55,6\n")
        r = csvsum(p, "price")
        self.assertEqual((r.returncode, r.stdout), (0, "7.75\n"))

    def test_prefix_of_other_column(self):
        p = self.write("t.csv", "total_cost,cost\n100,1\n200,2\n")
        self.assertEqual(csvsum(p, "cost").stdout, "3.00\n")
        self.assertEqual(csvsum(p, "total_cost").stdout, "300.00\n")

    def test_decimals_and_empty_cells(self):
        p = self.write("m.csv", "a,b\n0.25,x\n,y\n10.5,z\n-3.12,w\n")
        r = csvsum(p, "a")
        self.assertEqual((r.returncode, r.stdout), (0, "7.63\n"))

    def test_integers_still_two_decimals(self):
        p = self.write("n.csv", "id,n\n1,7\n2,8\n")
        self.assertEqual(csvsum(p, "n").stdout, "15.00\n")

    def test_partial_name_is_not_a_column(self):
        p = self.write("o.csv", "unit_price,qty\n1,2\n")
        r = csvsum(p, "price")
        self.assertEqual((r.returncode, r.stdout), (2, ""))

    def test_missing_file(self):
        r = csvsum(os.path.join(self.tmp.name, "nope.csv"), "a")
        self.assertEqual((r.returncode, r.stdout), (2, ""))
