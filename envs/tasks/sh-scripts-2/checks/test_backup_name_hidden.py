import os
import subprocess
import tempfile
import unittest

WS = os.getcwd()  # the checks run with cwd /workspace
SCRIPT = os.path.join(WS, "backup-name.sh")
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


class TestBackupNameHidden(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dest = os.path.join(self.tmp.name, "backups")
        os.mkdir(self.dest)

    def touch(self, *names):
        for name in names:
            open(os.path.join(self.dest, name), "w").close()

    def run_script(self, *args):
        return subprocess.run(["/bin/bash", SCRIPT, *args], capture_output=True, text=True, env=ENV,
                              timeout=20, cwd=self.tmp.name)

    def name(self, date, src):
        r = self.run_script("-d", date, src, self.dest)
        self.assertEqual(r.returncode, 0)
        return r.stdout

    def test_highest_plus_one(self):
        self.touch("photos-20231130-02.tar.gz", "photos-20231130-05.tar.gz")
        self.assertEqual(self.name("20231130", "/data/photos//"), "photos-20231130-06.tar.gz\n")

    def test_leading_zero_numbers(self):
        self.touch("db-20230909-08.tar.gz", "db-20230909-09.tar.gz")
        self.assertEqual(self.name("20230909", "db.sql"), "db-20230909-10.tar.gz\n")

    def test_only_same_stem_and_date(self):
        self.touch("db-20230908-07.tar.gz", "dbx-20230909-04.tar.gz", "db-20230909-01.tar.gz",
                   "db-20230909-03.tar", "db-20230909-x2.tar.gz")
        self.assertEqual(self.name("20230909", "db.sql"), "db-20230909-02.tar.gz\n")

    def test_two_digit_numbers(self):
        self.touch(*["logs-20240229-%02d.tar.gz" % n for n in (1, 2, 11, 12)])
        self.assertEqual(self.name("20240229", "logs"), "logs-20240229-13.tar.gz\n")

    def test_stems(self):
        self.assertEqual(self.name("20240101", "archive.tar.gz"), "archive.tar-20240101-01.tar.gz\n")
        self.assertEqual(self.name("20240101", "report.2023"), "report-20240101-01.tar.gz\n")
        self.assertEqual(self.name("20240101", "/etc/.profile"), ".profile-20240101-01.tar.gz\n")
        self.assertEqual(self.name("20240101", "Makefile"), "Makefile-20240101-01.tar.gz\n")

    def test_errors(self):
        self.assertEqual(self.run_script("-d", "240101", "x", self.dest).returncode, 2)
        self.assertEqual(self.run_script("-d", "20240101", "x", os.path.join(self.tmp.name, "nope")).returncode, 2)
