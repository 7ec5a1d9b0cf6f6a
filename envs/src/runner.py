"""Arbor's check runner (trusted; embedded in the arbor binary).

It runs inside a throwaway fork of the agent's final snapshot, as
`/usr/bin/python3 -I -S -B /verifier/.arbor/runner.py MODE ...`, with the
task's hidden checks mounted read-only at /verifier. Nothing of the agent's
runs before this file has imported everything it needs: `-I` ignores PYTHON*
variables and the user site, `-S` skips `site` (so no `.pth` file and no
`sitecustomize`/`usercustomize` is processed), `-B` writes no bytecode, and
/workspace is *appended* to sys.path, so a planted `json.py` or `unittest.py`
cannot shadow the standard library.

Modes:
  list                 print the test ids found statically (AST) in /verifier
  run NONCE_FILE PY... run every test; compile the listed workspace files
                       (the soft-quality lint) first

The verdict is decided by the arbor process from one line on stdout,
`ARBOR-RESULT <nonce> <json>`. The nonce is read from a file that is deleted
before any workspace code is imported, so code of the agent's that prints a
line of its own cannot produce a valid one. Assertions are strict: both sides
must be plain built-in data, compared by type and value, so objects whose
`__eq__` always answers yes fail. After the tests the runner compares
fingerprints of unittest, builtins, json, os, sys and its own module with
those taken before the workspace was importable: any difference (a
monkeypatched `TestCase.assertEqual`, `TestResult`, `os._exit`, ...) is
reported as tampering, which scores 0.
"""

import ast
import builtins
import importlib.util
import json
import math
import os
import sys
import traceback
import types
import unittest
import unittest.case
import unittest.loader
import unittest.result
import unittest.suite

CHECKS = "/verifier"
WORKSPACE = "/workspace"
PLAIN_SCALARS = (type(None), bool, int, float, str, bytes)
PLAIN_CONTAINERS = (list, tuple, dict, set, frozenset)


def check_files():
    return sorted(
        f for f in os.listdir(CHECKS) if f.startswith("test") and f.endswith(".py")
    )


def static_ids(files):
    """Test ids (`module.Class.method`) from the source alone, no import."""
    ids = []
    for name in files:
        with open(os.path.join(CHECKS, name), "rb") as f:
            tree = ast.parse(f.read(), filename=name)
        stem = name[:-3]
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(
                        item, (ast.FunctionDef, ast.AsyncFunctionDef)
                    ) and item.name.startswith("test"):
                        ids.append(f"{stem}.{node.name}.{item.name}")
    return ids


def plain(value, depth=0):
    """A canonical form of plain built-in data, or TypeError."""
    if depth > 50:
        raise TypeError("value nested too deeply")
    t = type(value)
    if t in PLAIN_SCALARS:
        if t is float and math.isnan(value):
            return ("nan",)
        return (t.__name__, value)
    if t is list or t is tuple:
        return (t.__name__, tuple(plain(v, depth + 1) for v in value))
    if t is dict:
        items = [(plain(k, depth + 1), plain(v, depth + 1)) for k, v in value.items()]
        return ("dict", frozenset(items))
    if t is set or t is frozenset:
        return (t.__name__, frozenset(plain(v, depth + 1) for v in value))
    raise TypeError(
        f"not plain data: {t.__module__}.{t.__qualname__} (checks compare built-in values only)"
    )


def strict_equal(a, b):
    return plain(a) == plain(b)


def canon(value, depth=0):
    """Plain data as JSON the arbor process compares itself (see verifier.rs)."""
    if depth > 50:
        raise TypeError("value nested too deeply")
    t = type(value)
    if value is None:
        return ["none"]
    if t is bool:
        return ["bool", value]
    if t is int:
        return ["int", str(value)]
    if t is float:
        return ["float", repr(value)]
    if t is str:
        return ["str", value]
    if t is bytes:
        return ["bytes", value.hex()]
    if t is list or t is tuple:
        return [t.__name__, [canon(v, depth + 1) for v in value]]
    if t is dict:
        pairs = [[canon(k, depth + 1), canon(v, depth + 1)] for k, v in value.items()]
        pairs.sort(key=lambda p: json.dumps(p[0]))
        return ["dict", pairs]
    if t is set or t is frozenset:
        items = [canon(v, depth + 1) for v in value]
        items.sort(key=json.dumps)
        return [t.__name__, items]
    raise TypeError(
        f"not plain data: {t.__module__}.{t.__qualname__} (checks compare built-in values only)"
    )


# The assertions of the test running now, as [op, canonical values...]:
# re-evaluated by the arbor process, which decides.
RECORD = []
RECORD_LIMIT = 512 << 10
RECORD_SIZE = [0]


def record(op, *values):
    entry = [op] + [canon(v) for v in values]
    size = len(json.dumps(entry))
    RECORD_SIZE[0] += size
    if RECORD_SIZE[0] > RECORD_LIMIT:
        RECORD.append(["overflow"])
    else:
        RECORD.append(entry)


def install_strict_assertions():
    """Replace the comparing assertions of unittest.TestCase with strict,
    recording ones."""
    TC = unittest.case.TestCase

    def fail(msg, extra):
        raise AssertionError(msg if msg is not None else extra)

    def assertEqual(self, first, second, msg=None):
        record("eq", first, second)
        if not strict_equal(first, second):
            fail(msg, f"{first!r} != {second!r}")

    def assertNotEqual(self, first, second, msg=None):
        record("ne", first, second)
        if strict_equal(first, second):
            fail(msg, f"{first!r} == {second!r}")

    def assertTrue(self, expr, msg=None):
        if type(expr) is not bool:
            fail(msg, f"{expr!r} is not a bool")
        record("true", expr)
        if expr is not True:
            fail(msg, f"{expr!r} is not True")

    def assertFalse(self, expr, msg=None):
        if type(expr) is not bool:
            fail(msg, f"{expr!r} is not a bool")
        record("false", expr)
        if expr is not False:
            fail(msg, f"{expr!r} is not False")

    def members(container):
        t = type(container)
        if t is dict:
            return [plain(k) for k in container]
        plain(container)
        return [plain(v) for v in container]

    def contains(member, container):
        if type(container) in (str, bytes):
            if type(member) is not type(container):
                raise TypeError("assertIn on text needs text on both sides")
            return member in container
        return plain(member) in members(container)

    def assertIn(self, member, container, msg=None):
        found = contains(member, container)
        record("in", member, container)
        if not found:
            fail(msg, f"{member!r} not found in {container!r}")

    def assertNotIn(self, member, container, msg=None):
        found = contains(member, container)
        record("notin", member, container)
        if found:
            fail(msg, f"{member!r} unexpectedly found in {container!r}")

    def assertIsNone(self, obj, msg=None):
        if obj is None:
            record("eq", None, None)
        else:
            fail(msg, f"{obj!r} is not None")

    def assertIsNotNone(self, obj, msg=None):
        if obj is None:
            record("ne", None, None)
            fail(msg, "unexpectedly None")

    def number(x):
        if type(x) not in (int, float):
            raise TypeError(f"not a number: {type(x).__qualname__}")
        return x

    def assertAlmostEqual(self, first, second, places=None, msg=None, delta=None):
        a, b = number(first), number(second)
        if delta is not None:
            number(delta)
            record("near", a, b, float(delta))
            ok = abs(a - b) <= delta
        else:
            places = 7 if places is None else places
            record("near", a, b, 0.5 * 10.0 ** (-places))
            ok = a == b or round(abs(a - b), places) == 0
        if not ok:
            fail(msg, f"{a!r} != {b!r} within tolerance")

    def ordered(op, name, text):
        def check(self, a, b, msg=None):
            pa, pb = plain(a), plain(b)
            numbers = pa[0] in ("int", "float") and pb[0] in ("int", "float")
            if not numbers:
                raise TypeError(f"ordering assertions compare numbers, not {pa[0]} and {pb[0]}")
            record(name, a, b)
            if not op(a, b):
                fail(msg, f"{a!r} not {text} {b!r}")

        return check

    replacements = {
        "assertEqual": assertEqual,
        "assertEquals": assertEqual,
        "assertListEqual": assertEqual,
        "assertTupleEqual": assertEqual,
        "assertDictEqual": assertEqual,
        "assertSetEqual": assertEqual,
        "assertSequenceEqual": assertEqual,
        "assertMultiLineEqual": assertEqual,
        "assertNotEqual": assertNotEqual,
        "assertTrue": assertTrue,
        "assert_": assertTrue,
        "assertFalse": assertFalse,
        "assertIn": assertIn,
        "assertNotIn": assertNotIn,
        "assertIsNone": assertIsNone,
        "assertIsNotNone": assertIsNotNone,
        "assertAlmostEqual": assertAlmostEqual,
        "assertLess": ordered(lambda a, b: a < b, "lt", "less than"),
        "assertLessEqual": ordered(lambda a, b: a <= b, "le", "less than or equal to"),
        "assertGreater": ordered(lambda a, b: a > b, "gt", "greater than"),
        "assertGreaterEqual": ordered(lambda a, b: a >= b, "ge", "greater than or equal to"),
    }
    original_raises = TC.assertRaises

    def assertRaises(self, expected_exception, *args, **kwargs):
        record("raises")
        return original_raises(self, expected_exception, *args, **kwargs)

    replacements["assertRaises"] = assertRaises
    for name, fn in replacements.items():
        setattr(TC, name, fn)


def fingerprint():
    """Identities of everything a test verdict depends on."""
    watched = {
        "builtins": builtins,
        "unittest": unittest,
        "unittest.case": unittest.case,
        "unittest.result": unittest.result,
        "unittest.loader": unittest.loader,
        "unittest.suite": unittest.suite,
        "json": json,
        "os": os,
        "sys": sys,
        "math": math,
        "runner": sys.modules[__name__],
    }
    fp = {}
    for label, mod in watched.items():
        for k, v in list(vars(mod).items()):
            if label == "sys" and k in ("modules", "path", "path_importer_cache", "last_value",
                                        "last_type", "last_traceback", "exc_info"):
                continue
            if isinstance(v, types.ModuleType):
                continue  # submodules imported later (unittest.mock) are not tampering
            fp[f"{label}.{k}"] = id(v)
    fp["sys.meta_path"] = tuple(id(f) for f in sys.meta_path)
    fp["sys.path_hooks"] = tuple(id(f) for f in sys.path_hooks)
    for cls in (unittest.case.TestCase, unittest.result.TestResult, unittest.suite.TestSuite,
                unittest.loader.TestLoader, unittest.case.SkipTest):
        for k, v in list(vars(cls).items()):
            fp[f"{cls.__module__}.{cls.__qualname__}.{k}"] = id(v)
    for name in ("json", "os", "sys", "unittest", "unittest.case", "math", "builtins"):
        fp[f"sys.modules[{name}]"] = id(sys.modules.get(name))
    return fp


def tampering(before, after):
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return changed[:50]


def lint(paths):
    errors = []
    for rel in paths:
        path = os.path.join(WORKSPACE, rel)
        try:
            with open(path, "rb") as f:
                compile(f.read(), rel, "exec", dont_inherit=True)
        except SyntaxError as e:
            errors.append(f"{rel}:{e.lineno}: {e.msg}")
        except (OSError, ValueError) as e:
            errors.append(f"{rel}: {e}")
    return errors


def run_tests(files, ids):
    TestCase = unittest.case.TestCase
    by_file = {}
    for test_id in ids:
        stem, cls, meth = test_id.split(".")
        by_file.setdefault(stem, []).append((cls, meth, test_id))
    outcomes = {}
    for name in files:
        stem = name[:-3]
        wanted = by_file.get(stem, [])
        try:
            spec = importlib.util.spec_from_file_location("arbor_check_" + stem,
                                                          os.path.join(CHECKS, name))
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        except BaseException as e:  # the workspace's import may raise anything
            for _, _, test_id in wanted:
                outcomes[test_id] = ("error", f"importing the check module failed: {e!r}"[:500], [])
            continue
        classes = {}
        for cls_name, meth, test_id in wanted:
            cls = vars(module).get(cls_name)
            if not (isinstance(cls, type) and issubclass(cls, TestCase)):
                outcomes[test_id] = ("error", f"{cls_name} is not a unittest.TestCase", [])
                continue
            classes.setdefault(cls_name, (cls, []))[1].append((meth, test_id))
        for cls_name, (cls, tests) in classes.items():
            try:
                cls.setUpClass()
            except BaseException as e:
                for _, test_id in tests:
                    outcomes[test_id] = ("error", f"setUpClass failed: {e!r}"[:500], [])
                continue
            for meth, test_id in tests:
                outcomes[test_id] = run_one(cls, meth)
            try:
                cls.tearDownClass()
            except BaseException:
                pass
    return outcomes


def run_one(cls, meth):
    del RECORD[:]
    outcome = run_one_inner(cls, meth)
    return outcome + (list(RECORD),)


def run_one_inner(cls, meth):
    try:
        test = cls(meth)
        test.setUp()
        try:
            getattr(test, meth)()
        finally:
            test.tearDown()
            test.doCleanups()
        return ("pass", "")
    except AssertionError as e:
        return ("fail", str(e)[:500])
    except unittest.case.SkipTest as e:
        return ("fail", f"skipped: {e}"[:500])
    except BaseException as e:
        tb = traceback.format_exception_only(type(e), e)
        return ("error", "".join(tb).strip()[:500])


def not_dumpable():
    """Keep other processes of the sandbox's user (a git hook the agent
    planted, say) out of this process's memory, where the nonce lives."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass


def main():
    not_dumpable()
    # Everything the verdict needs is bound here, before workspace code can run.
    write, exit_now, dumps = os.write, os._exit, json.dumps
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    files = check_files()
    ids = static_ids(files)
    if mode == "list":
        write(1, (dumps({"ids": ids}) + "\n").encode())
        exit_now(0)
    if mode != "run" or len(sys.argv) < 3:
        write(2, b"usage: runner.py list | run NONCE_FILE [PY_FILE...]\n")
        exit_now(2)
    with open(sys.argv[2], "r", encoding="ascii") as f:
        nonce = f.read().strip()
    os.unlink(sys.argv[2])
    lint_errors = lint(sys.argv[3:])
    install_strict_assertions()
    before = fingerprint()
    sys.path.append(WORKSPACE)
    os.chdir(WORKSPACE)
    outcomes = run_tests(files, ids)
    changed = tampering(before, fingerprint())
    missing = ("error", "did not run", [])
    tests = [
        {"id": test_id, "outcome": outcomes.get(test_id, missing)[0],
         "detail": outcomes.get(test_id, missing)[1],
         "asserts": outcomes.get(test_id, missing)[2]}
        for test_id in ids
    ]
    line = "ARBOR-RESULT " + nonce + " " + dumps(
        {"tests": tests, "tampered": changed, "lint": lint_errors}
    )
    sys.stdout.flush()
    write(1, ("\n" + line + "\n").encode())
    exit_now(0)


if __name__ == "__main__":
    main()
