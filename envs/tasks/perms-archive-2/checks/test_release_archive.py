import hashlib
import os
import subprocess
import tarfile
import unittest

ARCHIVE = "dist/site-2.1.0.tar.gz"
FILES = ["css/style.css", "index.html", "js/app.js"]


class TestReleaseArchive(unittest.TestCase):
    def test_gzip_tar_with_exact_members(self):
        with tarfile.open(ARCHIVE, "r:gz") as tar:
            self.assertEqual(sorted(m.name for m in tar.getmembers()), FILES)
            self.assertEqual(sorted(m.name for m in tar.getmembers() if m.isfile()), FILES)

    def test_member_contents(self):
        with tarfile.open(ARCHIVE, "r:gz") as tar:
            for name in FILES:
                with open(os.path.join("public", name), "rb") as f:
                    self.assertEqual(tar.extractfile(name).read().hex(), f.read().hex())

    def test_checksum_file(self):
        with open(ARCHIVE, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        with open(ARCHIVE + ".sha256") as f:
            self.assertEqual(f.read(), "%s  site-2.1.0.tar.gz\n" % digest)

    def test_sha256sum_accepts(self):
        r = subprocess.run(["sha256sum", "-c", "site-2.1.0.tar.gz.sha256"], cwd="dist",
                           capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout), (0, "site-2.1.0.tar.gz: OK\n"))

    def test_dist_contents(self):
        self.assertEqual(sorted(os.listdir("dist")), ["site-2.1.0.tar.gz", "site-2.1.0.tar.gz.sha256"])


if __name__ == "__main__":
    unittest.main()
