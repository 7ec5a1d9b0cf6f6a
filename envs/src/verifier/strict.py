"""Strict assertions for the bundled task families (trusted side).

In strict mode the comparing assertions of `unittest.TestCase` accept only
plain built-in data on both sides (exact types, compared by type and value
on this side), and record every comparison as canonical JSON, which the
arbor process re-evaluates itself (envs/src/verifier/mod.rs, `recheck`): a
passing test stands only if every comparison it made holds there too, and it
must have made at least one. A value of the code under test that is not
plain data (a proxy) makes the assertion fail with a message that says so.
"""

import json
import math
import unittest
import unittest.case

PLAIN_SCALARS = (type(None), bool, int, float, str, bytes)
PLAIN_CONTAINERS = (list, tuple, dict, set, frozenset)


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
    raise TypeError(not_plain(t))


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
    raise TypeError(not_plain(t))


# The assertions of the test running now, as [op, canonical values...]:
# re-evaluated by the arbor process, which decides.
RECORD = []
RECORD_LIMIT = 512 << 10
RECORD_SIZE = [0]


def reset():
    """Start recording the assertions of the next test."""
    del RECORD[:]
    RECORD_SIZE[0] = 0


def not_plain(t):
    if getattr(t, "_arbor_remote", False):
        return (f"not plain data: a {t.__qualname__} from the code under test (strict checks "
                "compare built-in values only: int, float, str, bytes, list, tuple, dict, set)")
    return f"not plain data: {t.__module__}.{t.__qualname__} (checks compare built-in values only)"


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
