import subprocess
import unittest

BRANCH = "fix/readme-typo"
FIXED = """# tokenbox

A tiny service that hands out API tokens.

## Getting a token

Call `tokenbox issue NAME`. You will receive a token on stdout; store the token you receive in
your password manager. You receive at most one token per name and day.

## Revoking

`tokenbox revoke TOKEN` revokes a token at once.
"""


def git(*args):
    r = subprocess.run(["git", *args], capture_output=True, text=True)
    return r.returncode, r.stdout


class TestTypoBranch(unittest.TestCase):
    def test_branch_has_one_new_commit(self):
        self.assertEqual(git("rev-list", "--count", BRANCH), (0, "2\n"))
        self.assertEqual(git("rev-parse", BRANCH + "^"), git("rev-parse", "main"))

    def test_main_untouched(self):
        self.assertEqual(git("rev-list", "--count", "main"), (0, "1\n"))
        self.assertEqual(git("log", "-1", "--format=%s", "main"), (0, "base\n"))
        rc, text = git("show", "main:README.md")
        self.assertEqual(text.count("recieve"), 3)

    def test_commit_message(self):
        self.assertEqual(git("log", "-1", "--format=%s", BRANCH), (0, "Fix typo in README\n"))

    def test_only_readme_changed(self):
        self.assertEqual(git("diff", "--name-only", "main", BRANCH), (0, "README.md\n"))
        self.assertEqual(git("show", BRANCH + ":README.md"), (0, FIXED))

    def test_clean_tree_on_branch(self):
        self.assertEqual(git("status", "--porcelain"), (0, ""))
        self.assertEqual(git("symbolic-ref", "--short", "HEAD"), (0, BRANCH + "\n"))


if __name__ == "__main__":
    unittest.main()
