import os
import subprocess
import tempfile
import unittest

SCRIPT = os.path.abspath("scripts/count_lines.sh")


def make_input(root):
    d = os.path.join(root, "in put dir")
    os.makedirs(d)
    files = {
        "x-ray.txt": "a\nb\nc\nd\n",
        "my list.txt": "eggs\nflour\n",
        "zulu.txt": "z\n",
        "skip.log": "not counted\n",
    }
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return d


def run(in_dir, out):
    return subprocess.run(["bash", SCRIPT, in_dir, out], capture_output=True, text=True, timeout=20)


class TestCountLines(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.in_dir = make_input(self.tmp)
        self.out = os.path.join(self.tmp, "counts.txt")

    def read_out(self):
        with open(self.out) as f:
            return f.read()

    def test_all_files_listed(self):
        r = run(self.in_dir, self.out)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(self.read_out(), "my list.txt 2\nx-ray.txt 4\nzulu.txt 1\n")

    def test_old_output_replaced(self):
        with open(self.out, "w") as f:
            f.write("stale 99\n")
        run(self.in_dir, self.out)
        self.assertEqual(self.read_out(), "my list.txt 2\nx-ray.txt 4\nzulu.txt 1\n")

    def test_runs_twice_same_result(self):
        run(self.in_dir, self.out)
        run(self.in_dir, self.out)
        self.assertEqual(self.read_out().splitlines(), ["my list.txt 2", "x-ray.txt 4", "zulu.txt 1"])

    def test_other_folder(self):
        d = os.path.join(self.tmp, "second")
        os.makedirs(d)
        with open(os.path.join(d, "only.txt"), "w") as f:
            f.write("1\n2\n3\n4\n5\n6\n")
        r = run(d, self.out)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(self.read_out(), "only.txt 6\n")


if __name__ == "__main__":
    unittest.main()
