"""Strict assertions for the bundled task families (trusted side).

In strict mode the comparing assertions of `unittest.TestCase` accept only
plain built-in data on both sides (exact types, compared by type and value
on this side), and record every comparison as canonical JSON (the WebAssembly guest's
inspector's format, envs/src/canonical.rs), which the arbor process
re-evaluates itself (envs/src/verifier/recheck.rs): a
passing test stands only if every comparison it made holds there too, and it
must have made at least one. A value of the code under test that is not
plain data (a proxy) makes the assertion fail with a message that says so.
"""

import math
import unittest
import unittest.case

# The canonical format of graded values is the WebAssembly guest's
# inspector's (`arbor_inspect`; envs/src/canonical.rs documents it): the
# same JSON, the same refusals, so native and session tasks grade one
# format with one comparator.
SCALARS = (type(None), bool, int, float, str)
CONTAINERS = (list, tuple, dict, set, frozenset)
MARKERS = ("dict", "int", "set", "tuple")
MAX_DEPTH = 64
MAX_BYTES = 1 << 20
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def refuse(why, subject=False):
    """Refuse a value as not plain data; `subject`: it is an object of the
    code under test (the failure is then blamed on it)."""
    e = TypeError(f"not plain data: {why} (checks compare built-in values only: "
                  "None, bool, int, float, str, list, tuple, dict with str keys, "
                  "set of scalars)")
    if subject:
        e._arbor_blame = "subject"
    raise e


def check_str(s):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        refuse("a string with lone surrogates")


def canon(value, depth=0, scalar_only=False):
    """`value` as canonical JSON data (what the guest's inspector writes,
    and what the arbor process compares), or TypeError for what the
    inspector refuses: another type (a subclass too), a dict key that is
    not a str, a set holding a container, a float that is not finite, a
    string with lone surrogates, nesting deeper than 64."""
    if depth > MAX_DEPTH:
        refuse(f"nested deeper than {MAX_DEPTH} (or cyclic)")
    t = type(value)
    if value is None or t is bool:
        return value
    if t is int:
        return value if I64_MIN <= value <= I64_MAX else {"int": str(value)}
    if t is float:
        if not math.isfinite(value):
            refuse("a float that is not finite")
        return value
    if t is str:
        check_str(value)
        return value
    if scalar_only:
        refuse(f"a set holding a {t.__qualname__} (sets of scalars only)"
               if t in CONTAINERS else not_plain(t), from_subject(t))
    if t is list:
        return [canon(v, depth + 1) for v in value]
    if t is tuple:
        return {"tuple": [canon(v, depth + 1) for v in value]}
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                refuse(f"a dict key of type {type(k).__qualname__}")
            check_str(k)
            out[k] = canon(v, depth + 1)
        out = dict(sorted(out.items()))
        if len(out) == 1 and next(iter(out)) in MARKERS:
            return {"dict": out}
        return out
    if t is set or t is frozenset:
        items = [canon(v, depth + 1, scalar_only=True) for v in value]
        items.sort(key=canon_text)
        return {"set": items}
    refuse(not_plain(t), from_subject(t))


def float_text(x):
    """A float as the inspector writes it (Rust's `{:?}`: shortest digits
    that round-trip, an exponent below 1e-4 and from 1e16, never `+` or
    leading zeros in the exponent)."""
    r = repr(x)
    if "e" in r:
        mant, exp = r.split("e")
        sign = "-" if exp.startswith("-") else ""
        return f"{mant}e{sign}{exp.lstrip('+-').lstrip('0') or '0'}"
    return r


def string_text(s):
    out = ['"']
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20:
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def canon_text(c):
    """Canonical data (from `canon`) as the exact JSON text the inspector
    writes (no spaces, UTF-8 unescaped); sets sort their elements by it."""
    if c is None:
        return "null"
    if c is True:
        return "true"
    if c is False:
        return "false"
    t = type(c)
    if t is int:
        return str(c)
    if t is float:
        return float_text(c)
    if t is str:
        return string_text(c)
    if t is list:
        return "[" + ",".join(canon_text(v) for v in c) + "]"
    return "{" + ",".join(string_text(k) + ":" + canon_text(v) for k, v in c.items()) + "}"


def key(c):
    """A hashable comparison key of canonical data: equal exactly when the
    arbor process's comparator says the values are equal (types are never
    mixed: 1, 1.0 and True differ; a list is not a tuple)."""
    if c is None:
        return ("none",)
    t = type(c)
    if t is bool:
        return ("bool", c)
    if t is int:
        return ("int", c)
    if t is float:
        return ("float", c)
    if t is str:
        return ("str", c)
    if t is list:
        return ("list", tuple(key(v) for v in c))
    if len(c) == 1:
        (k, v), = c.items()
        if k == "tuple":
            return ("tuple", tuple(key(x) for x in v))
        if k == "set":
            return ("set", frozenset(key(x) for x in v))
        if k == "int":
            return ("int", int(v))
        if k == "dict":
            c = v
    return ("dict", frozenset((k, key(v)) for k, v in c.items()))


def plain(value):
    """The comparison key of plain data, or TypeError (see `canon`)."""
    return key(canon(value))


def strict_equal(a, b):
    return plain(a) == plain(b)


# The assertions of the test running now, as [op, canonical values...]:
# re-evaluated by the arbor process, which decides.
RECORD = []
RECORD_LIMIT = 512 << 10
RECORD_SIZE = [0]


def reset():
    """Start recording the assertions of the next test."""
    del RECORD[:]
    RECORD_SIZE[0] = 0


def from_subject(t):
    """Whether `t` is a class of the code under test (a proxy's)."""
    return bool(getattr(t, "_arbor_remote", False))


def not_plain(t):
    """Why a value of type `t` is refused."""
    if from_subject(t):
        return f"a {t.__qualname__} from the code under test"
    return f"a value of type {t.__module__}.{t.__qualname__}"


def record(op, *values):
    entry = [op] + [canon(v) for v in values]
    size = len(op) + sum(len(canon_text(c)) for c in entry[1:])
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
            plain(container)
            return [plain(k) for k in container]
        if t not in (list, tuple, set, frozenset):
            raise TypeError(f"assertIn needs a container, not a {t.__qualname__}")
        plain(container)
        return [plain(v) for v in container]

    def contains(member, container):
        if type(container) is str:
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
