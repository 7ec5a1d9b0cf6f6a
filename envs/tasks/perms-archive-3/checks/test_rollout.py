import os
import stat
import tarfile
import unittest


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def tree(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            out.append((os.path.relpath(p, root), os.path.islink(p), mode(p)))
    return sorted(out)


class TestRollout(unittest.TestCase):
    def test_current_link(self):
        self.assertTrue(os.path.islink("current"))
        self.assertEqual(os.readlink("current"), "releases/1.4.0")
        with open("current/VERSION") as f:
            self.assertEqual(f.read(), "1.4.0\n")

    def test_previous_link(self):
        self.assertTrue(os.path.islink("previous"))
        self.assertEqual(os.readlink("previous"), "releases/1.3.0")

    def test_bin_modes(self):
        self.assertEqual(mode("releases/1.4.0/bin/shopd"), 0o755)
        self.assertEqual(mode("releases/1.4.0/bin/migrate"), 0o755)
        self.assertEqual(mode("releases/1.4.0/conf/shopd.conf"), 0o644)
        self.assertEqual(mode("releases/1.4.0/VERSION"), 0o644)

    def test_other_releases_untouched(self):
        self.assertEqual(sorted(os.listdir("releases")), ["1.3.0", "1.4.0", "1.5.0-rc1"])
        self.assertEqual(tree("releases/1.3.0"), [
            ("VERSION", False, 0o644), ("bin", False, 0o755), ("bin/shopd", False, 0o755),
            ("conf", False, 0o755), ("conf/shopd.conf", False, 0o644)])
        self.assertEqual(tree("releases/1.5.0-rc1"), [
            ("VERSION", False, 0o644), ("bin", False, 0o755), ("bin/migrate", False, 0o755),
            ("bin/shopd", False, 0o755), ("conf", False, 0o755), ("conf/shopd.conf", False, 0o644)])

    def test_archive(self):
        self.assertEqual(sorted(os.listdir("archive")), ["1.1.0.tar.gz", "1.2.0.tar.gz"])
        with tarfile.open("archive/1.2.0.tar.gz", "r:gz") as tar:
            self.assertEqual(sorted(m.name for m in tar.getmembers()), [
                "1.2.0", "1.2.0/VERSION", "1.2.0/bin", "1.2.0/bin/shopd", "1.2.0/conf", "1.2.0/conf/shopd.conf"])
            self.assertEqual(tar.extractfile("1.2.0/conf/shopd.conf").read().decode(),
                             "[shopd]\nlisten = 0.0.0.0:9000\nrelease = 1.2.0\n")

    def test_no_stray_links(self):
        links = []
        for dirpath, dirnames, filenames in os.walk("."):
            for name in dirnames + filenames:
                if os.path.islink(os.path.join(dirpath, name)):
                    links.append(os.path.relpath(os.path.join(dirpath, name), "."))
        self.assertEqual(sorted(links), ["current", "previous"])


if __name__ == "__main__":
    unittest.main()
