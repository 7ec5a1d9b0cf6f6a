import gzip
import hashlib
import os
import subprocess
import tempfile
import unittest

SCRIPT = os.path.abspath("tools/make_bundle.sh")


def run(*args):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=20)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class TestMakeBundle(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.src_dir = os.path.join(self.tmp, "source files")
        os.makedirs(self.src_dir)

    def make(self, name, text):
        path = os.path.join(self.src_dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_spaces_in_names(self):
        src = self.make("sales q3 final.csv", "region,total\nnorth,17\nsouth,23\n")
        out = os.path.join(self.tmp, "bundle out")
        r = run(src, out)
        self.assertEqual(r.returncode, 0)
        gz = os.path.join(out, "sales q3 final.csv.gz")
        with gzip.open(gz, "rt") as f:
            self.assertEqual(f.read(), "region,total\nnorth,17\nsouth,23\n")
        with open(os.path.join(out, "SHA256SUMS")) as f:
            self.assertEqual(f.read(), "%s  sales q3 final.csv.gz\n" % sha(gz))

    def test_checksum_verifies(self):
        src = self.make("inventory list.txt", "bolts 40\nnuts 55\n")
        out = os.path.join(self.tmp, "o")
        self.assertEqual(run(src, out).returncode, 0)
        v = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
        self.assertEqual(v.returncode, 0)
        self.assertEqual(v.stdout, "inventory list.txt.gz: OK\n")

    def test_plain_names(self):
        src = self.make("notes.md", "# notes\n")
        out = os.path.join(self.tmp, "plain")
        self.assertEqual(run(src, out).returncode, 0)
        self.assertEqual(sorted(os.listdir(out)), ["SHA256SUMS", "notes.md.gz"])

    def test_missing_source_fails(self):
        out = os.path.join(self.tmp, "never")
        r = run(os.path.join(self.src_dir, "does not exist.txt"), out)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(out, "SHA256SUMS")))
        self.assertNotIn("bundle ready", r.stderr)


if __name__ == "__main__":
    unittest.main()
