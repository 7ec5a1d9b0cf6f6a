#!/usr/bin/env python3
"""Build the `swe-local` SWE-bench-style instances from pinned PyPI sdists.

For each project below: download the sdist (pinned name==version, checked
against its sha256), unpack it into a git repository REPOS/pypi__<name>
(commit 1: the pristine sdist; commit 2: one injected bug, the instance's
`base_commit`), and write one line of INSTANCES (instance_id, repo,
base_commit, patch = the fix, test_patch = a test exposing the bug,
FAIL_TO_PASS, PASS_TO_PASS, problem_statement).

Deterministic: fixed git author, committer and dates, so the commits (and
so base_commit) are the same on every run.

Nothing of the projects runs here: the archives are only unpacked, never
built or installed (no setup.py, no build backend). FAIL_TO_PASS and
PASS_TO_PASS were determined by running the tests through Arbor, in a
sandbox (see README.md).

    python3 envs/swe-local/make_instances.py REPOS INSTANCES [--cache DIR]
"""

import argparse
import hashlib
import html
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import urllib.request



def package_index():
    """The simple index pip uses here: $PIP_INDEX_URL, else pip's default (asked
    of pip, so no host name is written down here)."""
    url = os.environ.get("PIP_INDEX_URL")
    if not url:
        url = subprocess.run(
            [sys.executable, "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    return url.rstrip("/")


INDEX = package_index()

GIT_ENV = {
    "GIT_AUTHOR_NAME": "arbor swe-local",
    "GIT_AUTHOR_EMAIL": "swe-local@arbor.invalid",
    "GIT_COMMITTER_NAME": "arbor swe-local",
    "GIT_COMMITTER_EMAIL": "swe-local@arbor.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}

PROJECTS = [
    {
        "name": "idna",
        "version": "3.7",
        "sha256": "028ff3aadf0609c1fd278d8ea3089299412a7a8b9bd005dd08b9f8285bcb5cfc",
        "file": "idna/intranges.py",
        "fixed": "        if left <= int_ < right:\n",
        "buggy": "        if left <= int_ <= right:\n",
        "test_file": "tests/test_intranges.py",
        "test_append": '''

class IntrangeContainsEndTests(unittest.TestCase):

    def test_end_is_exclusive(self):
        ranges = intranges_from_list([5, 6, 7, 20])
        self.assertTrue(intranges_contain(7, ranges))
        self.assertFalse(intranges_contain(8, ranges))
        self.assertFalse(intranges_contain(21, ranges))
''',
        "statement": """\
`idna.intranges.intranges_contain` reports code points just past the end of a
range as contained: with `ranges = intranges_from_list([5, 6, 7, 20])`,
`intranges_contain(8, ranges)` is True, though 8 was never in the list (the
ranges' ends are exclusive). Fix it without changing anything else.
""",
    },
    {
        "name": "jmespath",
        "version": "1.0.1",
        "sha256": "90261b206d6defd58fdd5e85f478bf633a2901798906be2ad389150c5c60edbe",
        "file": "jmespath/functions.py",
        "fixed": "    def _func_ends_with(self, search, suffix):\n        return search.endswith(suffix)\n",
        "buggy": "    def _func_ends_with(self, search, suffix):\n        return search.startswith(suffix)\n",
        "test_file": "tests/test_functions.py",
        "test_new": '''import unittest

import jmespath


class TestStringFunctions(unittest.TestCase):
    def test_ends_with(self):
        data = {"name": "jackson"}
        self.assertTrue(jmespath.search("ends_with(name, 'son')", data))
        self.assertFalse(jmespath.search("ends_with(name, 'jack')", data))

    def test_starts_with(self):
        data = {"name": "jackson"}
        self.assertTrue(jmespath.search("starts_with(name, 'jack')", data))
        self.assertFalse(jmespath.search("starts_with(name, 'son')", data))

    def test_reverse(self):
        self.assertEqual(jmespath.search("reverse(@)", [1, 2, 3]), [3, 2, 1])
        self.assertEqual(jmespath.search("reverse(@)", "abc"), "cba")
''',
        "statement": """\
The JMESPath function `ends_with` answers the wrong question:
`jmespath.search("ends_with(name, 'son')", {"name": "jackson"})` is False, and
`ends_with(name, 'jack')` is True. It should say whether the string ends with
the suffix. Fix it without changing anything else.
""",
    },
    {
        "name": "boltons",
        "version": "24.0.0",
        "sha256": "7153feccaea1ff2e1472f68d4b57fadb796a2ee49d29f638f1c9cd8fb5ebd916",
        "file": "boltons/mathutils.py",
        "fixed": "    i = bisect.bisect_right(options, x)\n    if not i:\n",
        "buggy": "    i = bisect.bisect_left(options, x)\n    if not i:\n",
        "test_file": "tests/test_mathutils.py",
        "test_append": '''

def test_floor_of_an_option_is_itself():
    assert floor(1230, OPTIONS) == 1230
    assert floor(66, OPTIONS) == 66
    assert floor(1231, OPTIONS) == 1230
''',
        "statement": """\
`boltons.mathutils.floor(x, options)` skips an option equal to `x`:
`floor(1230, [66, 1230, 2399])` returns 66 instead of 1230, and
`floor(66, [66, 1230])` raises ValueError. The floor of a value that is one
of the options is that option. Fix it without changing anything else.
""",
    },
    {
        "name": "isodate",
        "version": "0.7.2",
        "sha256": "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
        "file": "src/isodate/duration.py",
        "fixed": "    div = (a / b).to_integral(ROUND_FLOOR)\n",
        "buggy": "    div = (a / b).to_integral(ROUND_DOWN)\n",
        "extra": [("from decimal import ROUND_FLOOR, Decimal\n",
                   "from decimal import ROUND_DOWN, ROUND_FLOOR, Decimal\n")],
        "test_file": "tests/test_duration.py",
        "test_append": '''

def test_add_negative_months_across_a_year():
    """Negative months carry into the previous year."""
    assert date(2020, 1, 15) + Duration(months=-2) == date(2019, 11, 15)
    assert Duration(years=1, months=-13) + date(2020, 3, 1) == date(2020, 2, 1)
''',
        "statement": """\
Adding a `Duration` with negative months to a date fails when the result falls
in an earlier year: `date(2020, 1, 15) + Duration(months=-2)` raises instead of
giving `date(2019, 11, 15)`. Fix it without changing anything else.
""",
    },
    {
        "name": "wcwidth",
        "version": "0.2.13",
        "sha256": "72ea0c06399eb286d978fdedb6923a9eb47e1c486ce63e9b4e64fc18303972b5",
        "file": "wcwidth/wcwidth.py",
        "fixed": "            # Zero Width Joiner, do not measure this or next character\n            idx += 2\n",
        "buggy": "            # Zero Width Joiner, do not measure this or next character\n            idx += 1\n",
        "test_file": "tests/test_core.py",
        "test_append": '''

def test_zwj_joins_the_next_character():
    # a Zero Width Joiner and the character it joins are not measured
    assert wcwidth.wcswidth(u'a\\u200d\\u4e00') == 1
    assert wcwidth.wcswidth(u'a\\u200d\\u4e00b') == 2
''',
        "statement": """\
`wcwidth.wcswidth` measures the character that follows a Zero Width Joiner
(U+200D): `wcswidth('a\\u200d\\u4e00')` is 3, but a joined character takes no
cells of its own, so it should be 1. Fix it without changing anything else.
""",
    },
]

# Determined by running the test patch's files through Arbor (before and after
# the fix); see README.md.
RESULTS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_ids.json")


def fetch(name, version, sha256, cache):
    """The sdist's bytes, from the cache or the index, checked."""
    fn = f"{name}-{version}.tar.gz"
    path = os.path.join(cache, fn)
    if os.path.isfile(path):
        data = open(path, "rb").read()
        if hashlib.sha256(data).hexdigest() == sha256:
            return data
    page = urllib.request.urlopen(f"{INDEX}/{name}/", timeout=60).read().decode()
    for href in re.findall(r'href="([^"]+)"', page):
        href = html.unescape(href)
        if href.split("#")[0].rsplit("/", 1)[-1] == fn:
            data = urllib.request.urlopen(href, timeout=120).read()
            break
    else:
        sys.exit(f"{name}=={version}: no sdist {fn} on {INDEX}")
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        sys.exit(f"{fn}: sha256 {got}, expected {sha256}")
    os.makedirs(cache, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return data


def git(repo, *args):
    env = dict(os.environ, **GIT_ENV)
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True,
                          capture_output=True, text=True).stdout


def unpack(data, dest):
    """Unpack the archive's files (without its top folder) into dest."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")[1:]
            if not parts or not m.isfile() or ".." in parts:
                continue
            out = os.path.join(dest, *parts)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f:
                f.write(tar.extractfile(m).read())
            os.chmod(out, 0o755 if m.mode & 0o111 else 0o644)


def replace_once(path, old, new):
    text = open(path).read()
    if text.count(old) != 1:
        sys.exit(f"{path}: expected exactly one {old!r}")
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def build(p, repos, cache, results):
    name = p["name"]
    repo = os.path.join(repos, f"pypi__{name}")
    if os.path.exists(repo):
        sys.exit(f"{repo} exists; give an empty REPOS folder")
    os.makedirs(repo)
    unpack(fetch(name, p["version"], p["sha256"], cache), repo)
    git(repo, "init", "-q", "-b", "main")
    # Every file of the sdist, also those its own .gitignore names (isodate's
    # generated version.py, say): the repository is the sdist as released.
    git(repo, "add", "-A", "--force")
    git(repo, "commit", "-q", "-m", f"{name} {p['version']} (PyPI sdist)")
    src = os.path.join(repo, p["file"])
    replace_once(src, p["fixed"], p["buggy"])
    for old, new in p.get("extra", []):
        replace_once(src, old, new)
    git(repo, "commit", "-q", "-am", "base: one injected bug")
    base = git(repo, "rev-parse", "HEAD").strip()
    # The fix.
    replace_once(src, p["buggy"], p["fixed"])
    for old, new in p.get("extra", []):
        replace_once(src, new, old)
    patch = git(repo, "diff")
    git(repo, "checkout", "-q", "--", ".")
    # The test patch.
    test = os.path.join(repo, p["test_file"])
    if "test_new" in p:
        with open(test, "w") as f:
            f.write(p["test_new"])
        git(repo, "add", "-N", p["test_file"])
        test_patch = git(repo, "diff")
        git(repo, "rm", "-q", "--cached", p["test_file"])
        os.remove(test)
    else:
        with open(test, "a") as f:
            f.write(p["test_append"])
        test_patch = git(repo, "diff")
        git(repo, "checkout", "-q", "--", ".")
    ids = results.get(name, {})
    return {
        "instance_id": f"swe-local-{name}-1",
        "repo": f"pypi/{name}",
        "base_commit": base,
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": ids.get("FAIL_TO_PASS", []),
        "PASS_TO_PASS": ids.get("PASS_TO_PASS", []),
        "problem_statement": (
            f"The workspace holds the `{name}` package ({p['version']}).\n"
            + p["statement"]
            + "It is graded by the package's own pytest suite (hidden).\n"
        ),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repos", help="an empty folder for the git repositories")
    ap.add_argument("instances", help="the JSON-lines file to write")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/arbor-swe-local"),
                    help="where downloaded sdists are kept")
    ap.add_argument("--only", help="one project name")
    args = ap.parse_args()
    results = {}
    if os.path.isfile(RESULTS_FILE):
        results = json.load(open(RESULTS_FILE))
    os.makedirs(args.repos, exist_ok=True)
    with open(args.instances, "w") as out:
        for p in PROJECTS:
            if args.only and p["name"] != args.only:
                continue
            inst = build(p, os.path.abspath(args.repos), args.cache, results)
            out.write(json.dumps(inst, sort_keys=True) + "\n")
            print(f"{inst['instance_id']}: base {inst['base_commit']}", file=sys.stderr)


if __name__ == "__main__":
    main()
