import subprocess
import unittest

BASE_CFG = "[app]\nname = reportgen\ndebug = false\nworkers = 2\n"
CHANGELOG = ("# Changelog\n\n## 1.4.0\n\n- Export reports as CSV.\n\n## 1.3.2\n\n- Fix crash on empty input.\n\n"
             "## 1.3.1\n\n- Faster start-up.\n")


def git(*args):
    r = subprocess.run(["git", *args], capture_output=True, text=True)
    return r.returncode, r.stdout


class TestRelease(unittest.TestCase):
    def test_one_release_commit_on_main(self):
        self.assertEqual(git("symbolic-ref", "--short", "HEAD"), (0, "main\n"))
        self.assertEqual(git("rev-list", "--count", "main"), (0, "2\n"))
        self.assertEqual(git("log", "-1", "--format=%s", "main"), (0, "Release 1.4.0\n"))

    def test_commit_contents(self):
        self.assertEqual(git("diff", "--name-only", "main~1", "main"), (0, "CHANGELOG.md\nVERSION\n"))
        self.assertEqual(git("show", "main:VERSION"), (0, "1.4.0\n"))
        self.assertEqual(git("show", "main:CHANGELOG.md"), (0, CHANGELOG))

    def test_debug_change_discarded(self):
        self.assertEqual(git("show", "main:src/app.cfg"), (0, BASE_CFG))
        with open("src/app.cfg") as f:
            self.assertEqual(f.read(), BASE_CFG)

    def test_notes_kept_untracked(self):
        self.assertEqual(git("status", "--porcelain"), (0, "?? notes.tmp\n"))
        with open("notes.tmp") as f:
            self.assertEqual(f.read(), "ask Dana about the CSV delimiter\n")

    def test_tag(self):
        self.assertEqual(git("rev-parse", "v1.4.0^{commit}"), git("rev-parse", "main"))


if __name__ == "__main__":
    unittest.main()
