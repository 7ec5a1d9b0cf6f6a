import os
import stat
import unittest


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


class TestModes(unittest.TestCase):
    def test_scripts_executable(self):
        self.assertEqual(mode("bin/backup.sh"), 0o755)
        self.assertEqual(mode("bin/rotate.sh"), 0o755)

    def test_readme_unchanged(self):
        self.assertEqual(mode("bin/README"), 0o644)

    def test_data_read_only(self):
        self.assertEqual(mode("data/prices.csv"), 0o444)
        self.assertEqual(mode("data/stock.csv"), 0o444)

    def test_incoming_still_writable(self):
        self.assertEqual(mode("data/incoming"), 0o755)
        self.assertEqual(mode("data/incoming/batch-0412.csv"), 0o664)

    def test_contents_unchanged(self):
        with open("data/prices.csv") as f:
            self.assertEqual(f.read(), "sku,price\nA-100,4.99\nB-220,12.50\n")
        with open("bin/rotate.sh") as f:
            self.assertEqual(f.read(), "#!/bin/sh\n# Keep the last 7 backups\nls -1t /backup/*.tar.gz | tail -n +8 | xargs -r rm --\n")


if __name__ == "__main__":
    unittest.main()
