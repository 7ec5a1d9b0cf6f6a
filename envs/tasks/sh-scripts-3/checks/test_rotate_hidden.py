import os
import subprocess
import tempfile
import unittest

WS = os.getcwd()  # the checks run with cwd /workspace
SCRIPT = os.path.join(WS, "rotate.sh")
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


class TestRotateHidden(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name

    def put(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def get(self, name):
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read()

    def rotate(self, *args):
        return subprocess.run(["/bin/bash", SCRIPT, *args], capture_output=True, text=True, env=ENV,
                              timeout=20, cwd=self.dir)

    def test_full_chain_drops_oldest(self):
        self.put("svc.log", "v5\n")
        for i in range(1, 5):
            self.put("svc.log.%d" % i, "v%d\n" % (5 - i))
        r = self.rotate("-k", "4", "svc.log")
        self.assertEqual((r.returncode, r.stdout), (0, "rotated svc.log\n"))
        self.assertEqual([self.get("svc.log.%d" % i) for i in range(1, 6)], ["v5\n", "v4\n", "v3\n", "v2\n", None])
        self.assertEqual(self.get("svc.log"), "")

    def test_gaps_are_kept(self):
        self.put("db.log", "now\n")
        self.put("db.log.2", "older\n")
        self.put("db.log.4", "oldest\n")
        r = self.rotate("db.log")
        self.assertEqual(r.returncode, 0)
        self.assertEqual([self.get("db.log.%d" % i) for i in range(1, 6)], ["now\n", None, "older\n", None, "oldest\n"])

    def test_min_bytes(self):
        self.put("big.log", "x" * 64)
        self.put("small.log", "y" * 10)
        self.put("exact.log", "z" * 32)
        self.put("small.log.1", "old small\n")
        r = self.rotate("-m", "32", "big.log", "small.log", "exact.log")
        self.assertEqual((r.returncode, r.stdout), (0, "rotated big.log\nskip small.log\nrotated exact.log\n"))
        self.assertEqual((self.get("big.log"), self.get("big.log.1")), ("", "x" * 64))
        self.assertEqual((self.get("small.log"), self.get("small.log.1"), self.get("small.log.2")), ("y" * 10, "old small\n", None))
        self.assertEqual(self.get("exact.log.1"), "z" * 32)

    def test_options_combined_and_spaces(self):
        self.put("my app.log", "fresh\n")
        self.put("my app.log.1", "prev\n")
        self.put("my app.log.2", "gone\n")
        r = self.rotate("-m", "1", "-k", "2", "my app.log")
        self.assertEqual((r.returncode, r.stdout), (0, "rotated my app.log\n"))
        self.assertEqual([self.get("my app.log.%d" % i) for i in (1, 2, 3)], ["fresh\n", "prev\n", None])

    def test_bad_usage(self):
        self.put("a.log", "a\n")
        self.assertEqual(self.rotate("-k", "0", "a.log").returncode, 2)
        self.assertEqual(self.rotate("-m", "lots", "a.log").returncode, 2)
        self.assertEqual(self.rotate("-m").returncode, 2)
        r = self.rotate("a.log", "b.log")
        self.assertEqual(r.returncode, 2)
        self.assertEqual((self.get("a.log"), self.get("a.log.1")), ("a\n", None))
