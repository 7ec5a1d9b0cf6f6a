import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "backup-name.sh")


def run(*args):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=20)


class TestBackupName(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dest = self.tmp.name

    def touch(self, *names):
        for name in names:
            open(os.path.join(self.dest, name), "w").close()

    def test_first_backup(self):
        r = run("-d", "20240102", "/srv/www/", self.dest)
        self.assertEqual(r.stdout, "www-20240102-01.tar.gz\n")

    def test_after_gap(self):
        self.touch("www-20240102-01.tar.gz", "www-20240102-03.tar.gz")
        r = run("-d", "20240102", "/srv/www", self.dest)
        self.assertEqual(r.stdout, "www-20240102-04.tar.gz\n")

    def test_keeps_inner_dots(self):
        r = run("-d", "20240102", "notes.v2.txt", self.dest)
        self.assertEqual(r.stdout, "notes.v2-20240102-01.tar.gz\n")

    def test_bad_date(self):
        self.assertEqual(run("-d", "2024-01-02", "x", self.dest).returncode, 2)


if __name__ == "__main__":
    unittest.main()
