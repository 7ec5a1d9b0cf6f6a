import subprocess
import unittest


def git(*args):
    r = subprocess.run(["git", *args], capture_output=True, text=True)
    return r.returncode, r.stdout


class TestRewrittenHistory(unittest.TestCase):
    def test_single_commit_on_main(self):
        self.assertEqual(git("symbolic-ref", "--short", "HEAD"), (0, "main\n"))
        self.assertEqual(git("rev-list", "--count", "--all"), (0, "1\n"))
        self.assertEqual(git("log", "-1", "--format=%s", "main"), (0, "Initial import\n"))

    def test_commit_tree(self):
        self.assertEqual(git("ls-tree", "-r", "--name-only", "main"),
                         (0, ".gitignore\nLICENSE\napp.py\nconfig.example.env\n"))

    def test_gitignore(self):
        rc, text = git("show", "main:.gitignore")
        self.assertEqual(rc, 0)
        lines = text.splitlines()
        self.assertIn("secrets.env", lines)
        self.assertIn("*.pyc", lines)
        self.assertIn("__pycache__/", lines)

    def test_secrets_kept_and_ignored(self):
        with open("secrets.env") as f:
            self.assertEqual(f.read(), "WEATHER_API_KEY=sk-live-8f2c91d0a7b44e3f\nWEATHER_CITY=Porto\n")
        self.assertEqual(git("check-ignore", "secrets.env"), (0, "secrets.env\n"))
        self.assertEqual(git("status", "--porcelain"), (0, ""))

    def test_release_branch(self):
        self.assertEqual(git("rev-parse", "release/1.0"), git("rev-parse", "main"))


if __name__ == "__main__":
    unittest.main()
