"""Arbor's verifier, subject side: the process that runs the code under test.

The verifier runs every check as two process trees in one throwaway fork of
the agent's final snapshot (the sandbox's *paired action*): the trusted
runner (trusted.py), which holds the hidden checks, and this subject, which
imports and executes workspace code. They share `/workspace` and `/tmp` but
not their processes, their mounts (`/verifier` exists only on the trusted
side) or their environment, and talk over one socket at fd 3.

This file is not on the subject's filesystem: the subject starts as
`python3 -I -S -B -c BOOTSTRAP`, and BOOTSTRAP reads this source from the
channel (the first frame the trusted side sends) and runs it in a namespace
of its own, which is in no module table.

The protocol is request/response, asked only by the trusted side. A frame is
a 4-byte big-endian length and that many bytes of UTF-8 JSON. Values cross
as plain data (exact built-in types, tagged: see `encode`) or as opaque
handles (`{"H": id}`) to objects that stay here; the trusted side never
hands over a reference to one of its own objects, only plain data, handles it
received, or a pickle of its own data (test doubles, callbacks), which is
rebuilt and run here. Nothing this process says is trusted: the trusted side
treats every answer as a claim by the code under test.

Defence in depth (the boundary does not rely on it): audit hooks refuse
walking the garbage collector, ctypes, trace and profile hooks and
/proc/*/mem, none of which code under test needs.
"""

import base64
import importlib
import io
import json
import math
import os
import pickle
import sys
import types
import warnings

CHANNEL = 3
MAX_FRAME = 64 << 20
# Output kept per request (the rest is dropped with a mark).
OUTPUT_CAP = 1 << 20
# Output written during one request past which every write fails: code
# under test that floods its output gets a named error, not the memory.
FLOOD_LIMIT = 64 << 20
# Ints past this many digits travel as hex (decimal parsing is quadratic).
INT_LIMIT = 10**4000
STDLIB = frozenset(sys.stdlib_module_names)


def _read_exact(n):
    chunks = []
    while n:
        chunk = os.read(CHANNEL, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame():
    n = int.from_bytes(_read_exact(4), "big")
    if n > MAX_FRAME:
        raise ValueError("frame too large")
    return json.loads(_read_exact(n).decode("utf-8"))


def write_frame(msg):
    body = json.dumps(msg, separators=(",", ":")).encode("utf-8", "surrogatepass")
    data = len(body).to_bytes(4, "big") + body
    view = memoryview(data)
    while view:
        n = os.write(CHANNEL, view)
        view = view[n:]


class Table:
    """The objects the trusted side holds handles to, kept alive until it
    releases them."""

    def __init__(self):
        self.objects = {}
        self.by_id = {}
        self.next = 1
        self.described = set()

    def handle(self, obj):
        key = id(obj)
        h = self.by_id.get(key)
        if h is not None and self.objects.get(h) is obj:
            return h
        h = self.next
        self.next += 1
        self.objects[h] = obj
        self.by_id[key] = h
        return h

    def get(self, h):
        try:
            return self.objects[h]
        except KeyError:
            raise LookupError(f"unknown handle {h}") from None

    def release(self, handles):
        for h in handles:
            obj = self.objects.pop(h, None)
            if obj is not None and self.by_id.get(id(obj)) == h:
                del self.by_id[id(obj)]


TABLE = Table()

# Twins of the trusted side's mutable containers that its shipped code
# captured (see boundary.py, `Client.mirror`), by mirror id; synchronised
# by value at every request and answer.
MIRRORS = {}
MIRROR_IDS = {}
MIRROR_SENT = {}
# Twins the current request named (always compared; others only while
# small, as on the trusted side).
REFERENCED = set()
SMALL_MIRROR = 1000
# Mirror ids this side gives its own containers (negative: the trusted side
# numbers its own upwards from 1).
NEXT_REVERSE = 0
# The global random generator's state as last agreed with the trusted side.
RANDOM_SENT = None


def apply_mirrors(updates):
    """Create and update the twins. New ones are made empty first (their
    contents may refer to each other in any order), then filled."""
    items = sorted(((int(k), v) for k, v in updates.items()), key=lambda kv: kv[0])
    shells = {"L": list, "D": dict, "S": set, "BA": bytearray}
    for mid, enc in items:
        if mid not in MIRRORS and "SENT" in enc:
            MIRRORS[mid] = object()
            MIRROR_IDS[id(MIRRORS[mid])] = mid
        if mid not in MIRRORS and "IO" in enc:
            MIRRORS[mid] = io.BytesIO() if enc["IO"][0] == "b" else io.StringIO()
            MIRROR_IDS[id(MIRRORS[mid])] = mid
    for mid, enc in items:
        if mid not in MIRRORS and "OBJ" not in enc and "ITER" not in enc:
            tag = next((t for t in shells if t in enc), None)
            if tag is None:
                raise ValueError("malformed mirror")
            MIRRORS[mid] = shells[tag]()
            MIRROR_IDS[id(MIRRORS[mid])] = mid
    for mid, enc in items:
        if mid not in MIRRORS and "OBJ" in enc:
            cls = rebuild(enc["cls"])
            obj = cls.__new__(cls)
            MIRRORS[mid] = obj
            MIRROR_IDS[id(obj)] = mid
    # Fill the newest first: nested mirrors are numbered after the objects
    # that hold them, and a parent's state may unpickle objects (a test
    # double's instance dict) that must already be filled.
    for mid, enc in items:
        if "ITER" in enc and mid not in MIRRORS:
            # Positioned below, once its sequence is filled (a position past
            # the end of a still empty list would be clamped).
            it = iter(rebuild(enc["ITER"][0]))
            MIRRORS[mid] = it
            MIRROR_IDS[id(it)] = mid
    for mid, enc in reversed(items):
        obj = MIRRORS[mid]
        if "SENT" in enc:
            continue
        if "ITER" in enc:
            pos = enc["ITER"][1]
            if pos is None:
                for _ in obj:
                    pass
            else:
                obj.__setstate__(pos)
            continue
        if "IO" in enc:
            kind, content, pos = enc["IO"]
            if content is None or obj.closed:
                continue
            obj.seek(0)
            obj.truncate()
            obj.write(base64.b64decode(content) if kind == "b" else content)
            obj.seek(pos)
            continue
        if "OBJ" in enc:
            state = rebuild(enc["OBJ"])
            obj.__dict__.clear()
            obj.__dict__.update(state)
            continue
        new = rebuild(enc)
        if type(obj) in (list, bytearray):
            obj[:] = new
        else:
            obj.clear()
            obj.update(new)
    for mid, _ in items:
        MIRROR_SENT[mid] = mirror_shape(MIRRORS[mid])
        REFERENCED.add(mid)


def mirror_state(mid):
    obj = MIRRORS[mid]
    if type(obj) is object:
        return {"SENT": True}
    if type(obj) in ITER_TYPES:
        return {"ITER": [None, iter_position(obj)]}
    if type(obj) in (io.BytesIO, io.StringIO) and obj.closed:
        return {"IO": ["b" if type(obj) is io.BytesIO else "s", None, 0]}
    if type(obj) in (list, dict, set, bytearray):
        return Encoder(top_mirror=mid).value(obj)
    if type(obj) is io.BytesIO:
        return {"IO": ["b", base64.b64encode(obj.getvalue()).decode("ascii"), obj.tell()]}
    if type(obj) is io.StringIO:
        return {"IO": ["s", obj.getvalue(), obj.tell()]}
    enc = Encoder(top_mirror=mid)
    return {"OBJ": {"D": [[enc.value(k), enc.value(x)] for k, x in obj.__dict__.items()]}}


ITER_TYPES = (type(iter([])), type(iter(())), type(iter(range(0))), type(iter(range(1 << 64))))


def iter_position(it):
    red = it.__reduce__()
    return red[2] if len(red) >= 3 else None


def mirror_shape(obj):
    """What must stay the same for a twin to be unchanged (as on the
    trusted side): its items' identities, or a file's content and position."""
    t = type(obj)
    if t is object:
        return ()
    if t in ITER_TYPES:
        return iter_position(obj)
    if t is list:
        return tuple(map(id, obj))
    if t is dict:
        return tuple(map(id, obj)), tuple(map(id, obj.values()))
    if t is set:
        return frozenset(map(id, obj))
    if t is bytearray:
        return bytes(obj)
    if t in (io.BytesIO, io.StringIO):
        return ("closed",) if obj.closed else (obj.getvalue(), obj.tell())
    d = obj.__dict__
    return tuple(d), tuple(map(id, d.values()))


def mirror_changes():
    """Twins this request changed, with their new state; and twins nothing
    here holds any more (None: the trusted side forgets the pair, so that
    neither side pays for it again)."""
    out = {}
    for mid, obj in MIRRORS.items():
        if mid not in REFERENCED:
            try:
                if len(obj) > SMALL_MIRROR:
                    continue
            except TypeError:
                pass
        shape = mirror_shape(obj)
        if shape != MIRROR_SENT.get(mid):
            out[str(mid)] = mirror_state(mid)
            MIRROR_SENT[mid] = shape
    # Held only by the table: the dict, the loop variable, the items pair
    # and getrefcount's own argument.
    gone = [mid for mid, obj in MIRRORS.items()
            if sys.getrefcount(obj) <= 4 and mid not in REFERENCED]
    for mid in gone:
        MIRROR_IDS.pop(id(MIRRORS.pop(mid)), None)
        MIRROR_SENT.pop(mid, None)
    REFERENCED.clear()
    return out, gone


class Unshipper(pickle.Unpickler):
    def persistent_load(self, pid):
        kind, mid = pid
        if kind != "mirror" or mid not in MIRRORS:
            raise pickle.UnpicklingError(f"unknown persistent object {pid!r}")
        return MIRRORS[mid]


def type_ref(cls):
    """A class as the trusted side can name it: a built-in or standard
    library class by module and qualified name, one of its own by its
    number, anything else as a handle with its description (sent once)."""
    n = SHIPPED_IDS.get(id(cls))
    if n is not None and SHIPPED.get(n) is cls:
        return {"TCLS": n}
    module = getattr(cls, "__module__", None)
    qualname = getattr(cls, "__qualname__", None)
    top = module.split(".")[0] if isinstance(module, str) else None
    if (
        isinstance(qualname, str)
        and top is not None
        and (module == "builtins" or top in STDLIB)
        and "<locals>" not in qualname
        and not _from_workspace(sys.modules.get(module))
    ):
        return {"std": [module, qualname]}
    h = TABLE.handle(cls)
    ref = {"H": h}
    if h not in TABLE.described:
        TABLE.described.add(h)
        ref["cls"] = describe(cls)
    return ref


def _from_workspace(module):
    f = getattr(module, "__file__", None)
    return isinstance(f, str) and any(f.startswith(p) for p in ROOTS)


def describe(cls):
    bases = []
    for b in cls.__bases__:
        if b is object:
            continue
        bases.append(type_ref(b))
    return {
        "name": str(cls.__name__),
        "qualname": str(getattr(cls, "__qualname__", cls.__name__)),
        "module": str(getattr(cls, "__module__", "")),
        "bases": bases,
        "exc": issubclass(cls, BaseException),
        "meta": None if type(cls) is type else type_ref(type(cls)),
        "dunders": [n for n in OPTIONAL_DUNDERS if getattr(cls, n, None) is not None],
    }


OPTIONAL_DUNDERS = (
    "__call__", "__iter__", "__next__", "__reversed__", "__len__", "__bool__", "__getitem__",
    "__setitem__", "__delitem__", "__contains__", "__enter__", "__exit__", "__int__", "__float__",
    "__index__", "__complex__", "__bytes__", "__fspath__", "__round__", "__trunc__", "__floor__",
    "__ceil__", "__get__", "__neg__", "__pos__", "__abs__", "__invert__",
) + tuple(f"__{p}{n}__" for n in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow",
                                  "lshift", "rshift", "and", "xor", "or")
          for p in ("", "r", "i")) + ("__divmod__", "__rdivmod__")


class Encoder:
    """Values as JSON: exact built-in types by value (twins of the trusted
    side's mirrored objects by their mirror id), everything else as a
    handle."""

    def __init__(self, top_mirror=None):
        self.depth = 0
        self.top_mirror = top_mirror

    def value(self, v):
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            if -INT_LIMIT < v < INT_LIMIT:
                return v
            return {"I": format(v, "x")}
        if t is float:
            if math.isfinite(v):
                return v
            return {"F": repr(v)}
        n = SHIPPED_FN_IDS.get(id(v))
        if n is not None and SHIPPED_FNS.get(n) is v:
            return {"TFN": n}
        mid = MIRROR_IDS.get(id(v))
        if mid is not None and mid != self.top_mirror and MIRRORS.get(mid) is v:
            # Named in this answer: kept until the trusted side has read it.
            REFERENCED.add(mid)
            return {"MIR": mid}
        self.depth += 1
        try:
            if self.depth > 200:
                raise RecursionError("value nested too deeply")
            if t in (list, dict, set, bytearray) and mid is None:
                # A container of this side's (a module's registry, a
                # result): mirrored the other way, so that what a test
                # adds to it here is added there.
                return self.reverse_mirror(v, t)
            if t is list:
                return {"L": [self.value(x) for x in v]}
            if t is tuple:
                return {"T": [self.value(x) for x in v]}
            if t is dict:
                return {"D": [[self.value(k), self.value(x)] for k, x in v.items()]}
            if t is set:
                return {"S": [self.value(x) for x in v]}
            if t is frozenset:
                return {"FS": [self.value(x) for x in v]}
            if t is bytes:
                return {"B": base64.b64encode(v).decode("ascii")}
            if t is bytearray:
                return {"BA": base64.b64encode(bytes(v)).decode("ascii")}
            if t is complex:
                return {"C": [self.value(v.real), self.value(v.imag)]}
            if t is range:
                return {"R": [v.start, v.stop, v.step]}
            if v is Ellipsis:
                return {"E": "Ellipsis"}
            if v is NotImplemented:
                return {"E": "NotImplemented"}
            std = std_value(v, t)
            if std is not None:
                return {"X": std}
            n = SHIPPED_IDS.get(id(t))
            if n is not None and SHIPPED.get(n) is t and not any(
                    b in (list, dict, set, bytearray) for b in t.__mro__):
                state = None
                if hasattr(v, "__dict__"):
                    state = {"D": [[self.value(k), self.value(x)] for k, x in v.__dict__.items()]}
                return {"TOBJ": [n, self.base_value(v, t), state]}
        finally:
            self.depth -= 1
        return self.handle(v)

    def reverse_mirror(self, v, t):
        global NEXT_REVERSE
        NEXT_REVERSE -= 1
        mid = NEXT_REVERSE
        MIRRORS[mid] = v
        MIRROR_IDS[id(v)] = mid
        REFERENCED.add(mid)
        enc = mirror_state(mid)
        MIRROR_SENT[mid] = mirror_shape(v)
        enc["RMIR"] = mid
        return enc

    def base_value(self, v, t):
        for base in (int, float, complex, str, bytes, tuple, frozenset):
            if base in t.__mro__:
                return self.value(base(v) if base in (tuple, frozenset) else getattr(base, {
                    int: "__int__", float: "__float__", complex: "__complex__",
                    str: "__str__", bytes: "__bytes__"}[base])(v))
        return None

    def handle(self, v):
        t = type(v)
        if t is types.ModuleType:
            return {"H": TABLE.handle(v), "mod": v.__name__,
                    "pkg": hasattr(v, "__path__"), "ws": _from_workspace(v)}
        if isinstance(v, type):
            return type_ref(v)
        return {"H": TABLE.handle(v), "t": type_ref(t)}


def encode(v):
    return Encoder().value(v)


def rebuild(data):
    """A value from the trusted side: plain immutable data, handles, the
    twins of its mirrored objects, or a pickle of its own objects (rebuilt
    here)."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is not dict or len(data) > 2:
        raise ValueError("malformed value")
    if "H" in data:
        return TABLE.get(data["H"])
    if "MIR" in data:
        mid = int(data["MIR"])
        REFERENCED.add(mid)
        return MIRRORS[mid]
    if "std" in data:
        module, qualname = data["std"]
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj
    if "L" in data:
        return [rebuild(x) for x in data["L"]]
    if "D" in data:
        return {rebuild(k): rebuild(x) for k, x in data["D"]}
    if "S" in data:
        return {rebuild(x) for x in data["S"]}
    if "BA" in data:
        return bytearray(base64.b64decode(data["BA"]))
    if "T" in data:
        return tuple(rebuild(x) for x in data["T"])
    if "FS" in data:
        return frozenset(rebuild(x) for x in data["FS"])
    if "B" in data:
        return base64.b64decode(data["B"])
    if "C" in data:
        return complex(rebuild(data["C"][0]), rebuild(data["C"][1]))
    if "I" in data:
        return int(data["I"], 16)
    if "F" in data:
        return float(data["F"])
    if "R" in data:
        return range(*data["R"])
    if "E" in data:
        return {"Ellipsis": Ellipsis, "NotImplemented": NotImplemented}[data["E"]]
    if "P" in data:
        return Unshipper(io.BytesIO(base64.b64decode(data["P"]))).load()
    raise ValueError("malformed value")


def std_value(v, t):
    """Values of a few standard-library types, as data the trusted side
    rebuilds with its own constructors (None for other types)."""
    module = t.__module__
    if module == "decimal" and t is getattr(sys.modules.get("decimal"), "Decimal", None):
        return ["Decimal", str(v)]
    if module == "fractions" and t is getattr(sys.modules.get("fractions"), "Fraction", None):
        return ["Fraction", [str(v.numerator), str(v.denominator)]]
    if module == "datetime":
        dt = sys.modules.get("datetime")
        if dt is None:
            return None
        tz = getattr(v, "tzinfo", None)
        if tz is not None and type(tz) is not dt.timezone:
            return None
        offset = None if tz is None else tz.utcoffset(None).total_seconds()
        if t is dt.datetime:
            return ["datetime", [v.year, v.month, v.day, v.hour, v.minute, v.second,
                                 v.microsecond, offset, v.fold]]
        if t is dt.date:
            return ["date", [v.year, v.month, v.day]]
        if t is dt.time:
            return ["time", [v.hour, v.minute, v.second, v.microsecond, offset, v.fold]]
        if t is dt.timedelta:
            return ["timedelta", [v.days, v.seconds, v.microseconds]]
    return None


# Helpers the trusted side's pickles name (module `_arbor_subject_support`):
# they rebuild test doubles and callbacks here, where they then run. The
# module holds nothing of the server's.
SUPPORT_SOURCE = r'''
import marshal, types, importlib
def handle(h):
    return _lookup(h)
def function(code, name, qualname, module, defaults, kwdefaults, closure, globals_, doc, attrs=(), number=None):
    g = {"__name__": module, "__builtins__": __builtins__}
    g.update(dict(globals_))
    cells = tuple(types.CellType(v) for v in closure) if closure is not None else None
    f = types.FunctionType(marshal.loads(code), g, name, defaults, cells)
    f.__qualname__ = qualname
    f.__kwdefaults__ = kwdefaults
    f.__doc__ = doc
    f.__module__ = module
    f.__dict__.update(attrs)
    if number is not None:
        _shipped_fn(number, f)
    return f
def klass(name, bases, qualname, module, meta, simple=(), number=None):
    ns = {"__qualname__": qualname, "__module__": module}
    ns.update(simple)
    cls = (meta or type)(name, bases, ns)
    if number is not None:
        _shipped(number, cls)
    _publish(cls)
    return cls
def shipped(number):
    if number not in _shipped_classes:
        _define(number)
    return _shipped_classes[number]
def testcase(cls, method, state):
    obj = cls.__new__(cls)
    import unittest
    unittest.TestCase.__init__(obj, method)
    obj.__dict__.update(dict(state))
    return obj
def memory(data, fmt, shape):
    return memoryview(data).cast("B").cast(fmt, shape)
def register_abc(cls, abcs):
    for module, name in abcs:
        getattr(importlib.import_module(module), name).register(cls)
def class_state(cls, state):
    for k, v in state:
        if k == "_arbor_abcs":
            register_abc(cls, v)
        else:
            setattr(cls, k, v)
def module(name):
    return importlib.import_module(name)
'''


def make_support(lookup):
    mod = types.ModuleType("_arbor_subject_support")
    mod.__dict__["_lookup"] = lookup
    mod.__dict__["_shipped"] = register_shipped
    mod.__dict__["_shipped_classes"] = SHIPPED
    mod.__dict__["_define"] = define_shipped
    mod.__dict__["_publish"] = publish_class
    mod.__dict__["_shipped_fn"] = register_shipped_fn
    exec(compile(SUPPORT_SOURCE, "<arbor-support>", "exec"), mod.__dict__)
    sys.modules[mod.__name__] = mod
    return mod


# Classes the trusted side shipped (test doubles), by its number for them:
# named back to it by that number, and their instances sent back as data.
SHIPPED = {}
SHIPPED_IDS = {}


# Definitions of shipped classes not yet made (made on first use, in any
# order: a class registers itself before its methods are rebuilt).
SHIPPED_DEFS = {}


# Functions the trusted side shipped by value, by its number for them: sent
# back as that number (its own function again).
SHIPPED_FN_IDS = {}
SHIPPED_FNS = {}


def register_shipped_fn(number, f):
    SHIPPED_FNS[number] = f
    SHIPPED_FN_IDS[id(f)] = number


def register_shipped(number, cls):
    SHIPPED[number] = cls
    SHIPPED_IDS[id(cls)] = number


def publish_class(cls):
    """Make a class the trusted side shipped importable by its module and
    name (in a stand-in module), so that pickling its instances here works
    as it does in the test's own process."""
    module, qualname = cls.__module__, cls.__qualname__
    if "<locals>" in qualname or "." in qualname or not isinstance(module, str):
        return
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name not in sys.modules:
            stub = types.ModuleType(name)
            stub.__arbor_stub__ = True
            sys.modules[name] = stub
            if i > 1:
                setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], stub)
    target = sys.modules[module]
    if getattr(target, "__arbor_stub__", False):
        setattr(target, qualname, cls)


def define_shipped(number):
    data = SHIPPED_DEFS.pop(number, None)
    if data is None:
        raise LookupError(f"the trusted side never defined its class {number}")
    Unshipper(io.BytesIO(base64.b64decode(data))).load()


SUPPORT = make_support(TABLE.get)
ROOTS = []


class CappedText(io.TextIOBase):
    """sys.stdout or sys.stderr of code under test: keeps the first
    OUTPUT_CAP characters of a request, counts the rest, and refuses writes
    past FLOOD_LIMIT."""

    def __init__(self, name):
        super().__init__()
        self.name = name
        self.parts = []
        self.kept = 0
        self.total = 0

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.total += len(s)
        if self.total > FLOOD_LIMIT:
            raise OSError(f"arbor verifier: the code under test flooded its output: more than "
                          f"{FLOOD_LIMIT >> 20} MiB written to sys.{self.name} during one call")
        if self.kept < OUTPUT_CAP:
            keep = s[:OUTPUT_CAP - self.kept]
            self.parts.append(keep)
            self.kept += len(keep)
        return len(s)

    def flush(self):
        pass

    def getvalue(self):
        text = "".join(self.parts)
        if self.total > self.kept:
            text += f"\n[arbor: {self.total - self.kept} characters dropped]\n"
        return text

    def reset(self):
        self.parts = []
        self.kept = 0
        self.total = 0


class Capture:
    """What code under test printed, warned and logged during one request:
    sent back with the answer, so the trusted side sees it where a test
    expects it (captured stdout, assertWarns, assertLogs)."""

    def __init__(self):
        self.out = CappedText("stdout")
        self.err = CappedText("stderr")
        sys.stdout = self.out
        sys.stderr = self.err
        self.log = None

    def watch_logging(self):
        """Once code under test has imported logging, record every record
        (the trusted side's loggers decide what to keep)."""
        if self.log is None and "logging" in sys.modules:
            import logging
            import logging.handlers
            self.log = logging.handlers.BufferingHandler(1 << 30)
            root = logging.getLogger()
            root.addHandler(self.log)
            root.setLevel(logging.NOTSET)

    @staticmethod
    def drain(buf):
        text = buf.getvalue()
        buf.reset()
        return text

    def collect(self, reply, caught):
        out, err = self.drain(self.out), self.drain(self.err)
        if out:
            reply["out"] = out
        if err:
            reply["err"] = err
        if caught:
            reply["warn"] = [
                [type_ref(w.category), str(w.message), str(w.filename), int(w.lineno or 0)]
                for w in caught[:200]
            ]
        self.watch_logging()
        records = self.log.buffer if self.log is not None else None
        if records:
            self.log.buffer = []
            logs = []
            for r in records[:1000]:
                try:
                    msg = r.getMessage()
                except Exception as e:  # a bad format string is the code's own
                    msg = f"[arbor: unformattable log message: {e!r}]"
                logs.append([str(r.name), int(r.levelno), msg[:20000], str(r.pathname),
                             int(r.lineno or 0), str(r.funcName)])
            reply["log"] = logs


def exception_reply(e, _depth=0):
    import traceback
    cls = type(e)
    try:
        text = str(e)
    except BaseException:
        text = f"<{cls.__name__}: str() failed>"
    try:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename != "<arbor-subject>"]
        tb = "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(cls, e))
    except BaseException:
        tb = ""
    try:
        args = encode(e.args)
    except BaseException:
        args = {"T": []}
    reply = {"H": TABLE.handle(e), "t": type_ref(cls), "args": args,
             "str": text[:20000], "tb": tb[-20000:]}
    if e.__suppress_context__:
        reply["suppress"] = True
    cause = e.__cause__
    if isinstance(cause, BaseException) and cause is not e and _depth < 3:
        reply["cause"] = exception_reply(cause, _depth + 1)
    return reply


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "matmul": lambda a, b: a @ b, "truediv": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
    "pow": lambda a, b: a ** b, "lshift": lambda a, b: a << b,
    "rshift": lambda a, b: a >> b, "and": lambda a, b: a & b,
    "xor": lambda a, b: a ^ b, "or": lambda a, b: a | b,
    "divmod": divmod,
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "contains": lambda a, b: b in a, "getitem": lambda a, b: a[b],
    "delitem": lambda a, b: a.__delitem__(b), "getattr": getattr,
    "delattr": delattr, "format": format, "round": round,
}
INPLACE = {
    "iadd": "add", "isub": "sub", "imul": "mul", "imatmul": "matmul",
    "itruediv": "truediv", "ifloordiv": "floordiv", "imod": "mod", "ipow": "pow",
    "ilshift": "lshift", "irshift": "rshift", "iand": "and", "ixor": "xor", "ior": "or",
}
UNARY = {
    "neg": lambda a: -a, "pos": lambda a: +a, "abs": abs, "invert": lambda a: ~a,
    "bool": bool, "len": len, "hash": hash, "iter": iter, "next": next,
    "reversed": reversed, "str": str, "repr": repr, "int": int, "float": float,
    "index": __import__("operator").index, "complex": complex, "bytes": bytes,
    "dir": lambda a: sorted(str(n) for n in dir(a)), "fspath": os.fspath,
    "copy": lambda a: __import__("copy").copy(a),
    "deepcopy": lambda a: __import__("copy").deepcopy(a),
    "pickle": lambda a: pickle.dumps(a, 4), "unpickle": pickle.loads,
    "trunc": math.trunc, "floor": math.floor, "ceil": math.ceil,
    "enter": lambda a: a.__enter__(),
    "type": type,
}


def inplace(name, a, b):
    method = getattr(type(a), "__" + name + "__", None)
    if method is not None:
        result = method(a, b)
        if result is not NotImplemented:
            return result
    return BINARY[INPLACE[name]](a, b)


def run_program(req):
    """A program a check starts (subprocess, os.system): it runs here, never
    on the trusted side."""
    import subprocess
    args = req["argv"]
    if not isinstance(args, str):
        args = [str(a) for a in args]
    kwargs = {"cwd": req.get("program_cwd") or None, "shell": bool(req.get("shell")),
              "stdin": subprocess.DEVNULL, "capture_output": True}
    if req.get("program_env") is not None:
        kwargs["env"] = {str(k): str(v) for k, v in req["program_env"].items()}
    data = req.get("input")
    if data is not None:
        kwargs["input"] = base64.b64decode(data)
        del kwargs["stdin"]
    timeout = req.get("timeout")
    try:
        r = subprocess.run(args, timeout=timeout, **kwargs)
        return {"code": r.returncode, "stdout": base64.b64encode(r.stdout).decode(),
                "stderr": base64.b64encode(r.stderr).decode()}
    except subprocess.TimeoutExpired as e:
        return {"timeout": True,
                "stdout": base64.b64encode(e.stdout or b"").decode(),
                "stderr": base64.b64encode(e.stderr or b"").decode()}
    except OSError as e:
        return {"oserror": [e.errno or 0, str(e.strerror or e), str(e.filename or "")]}


def import_module(name, fresh, blocked):
    """Import `name` as the trusted side asked: a plain import, or (what
    import_fresh_module does there) a fresh one with `blocked` modules made
    unimportable, leaving this side's module table as it was."""
    if not fresh and not blocked:
        return importlib.import_module(name)
    missing = object()
    saved = {n: sys.modules.get(n, missing) for n in [name, *blocked]}
    try:
        sys.modules.pop(name, None)
        for b in blocked:
            sys.modules[b] = None
        return importlib.import_module(name)
    finally:
        for n, m in saved.items():
            if m is missing:
                if n != name:
                    sys.modules.pop(n, None)
            else:
                sys.modules[n] = m


def handle_request(req, capture):
    op = req["op"]
    if op == "import":
        return {"value": encode(import_module(req["name"], req.get("fresh"), req.get("blocked") or []))}
    if op == "describe":
        return {"value": describe(TABLE.get(req["target"]["H"]))}
    if op == "define":
        cls = rebuild(req["target"])
        h = TABLE.handle(cls)
        TABLE.described.add(h)
        return {"value": {"H": h}}
    if op == "modules":
        return {"value": encode(workspace_modules())}
    if op == "run":
        return {"value": run_program(req)}
    target = rebuild(req["target"]) if "target" in req else None
    args = [rebuild(a) for a in req.get("args", [])]
    kwargs = {str(k): rebuild(v) for k, v in req.get("kwargs", [])}
    if op == "call":
        result = target(*args, **kwargs)
    elif op == "method":
        result = getattr(target, req["name"])(*args, **kwargs)
    elif op == "setattr":
        setattr(target, req["name"], args[0])
        result = None
    elif op == "setitem":
        target[args[0]] = args[1]
        result = None
    elif op == "get":
        getter = getattr(type(target), "__get__", None)
        result = target if getter is None else getter(target, *args)
    elif op == "exit":
        result = target.__exit__(*args)
    elif op in UNARY:
        result = UNARY[op](target, *args)
    elif op in BINARY:
        result = BINARY[op](target, *args)
    elif op in INPLACE:
        result = inplace(op, target, args[0])
    elif op.startswith("r") and op[1:] in BINARY:
        result = BINARY[op[1:]](args[0], target)
    elif op == "doctest_find":
        import doctest
        name, recurse, exclude_empty = args
        finder = doctest.DocTestFinder(recurse=recurse, exclude_empty=exclude_empty)
        result = [[t.name, t.filename or "", t.lineno, len(t.examples), t.docstring]
                  for t in finder.find(target, name)]
    elif op == "doctest_run":
        import doctest
        name, test_name, flags = args
        tests = [t for t in doctest.DocTestFinder().find(target, name) if t.name == test_name]
        if not tests:
            raise LookupError(f"no doctest named {test_name}")
        report = []
        runner = doctest.DocTestRunner(verbose=False, optionflags=flags)
        r = runner.run(tests[0], out=report.append)
        result = [r.failed, r.attempted, "".join(report)]
    elif op == "next_batch":
        result = []
        for _ in range(int(args[0])):
            try:
                result.append(next(target))
            except StopIteration:
                break
        return {"items": encode(result)}
    else:
        raise ValueError(f"unknown operation {op!r}")
    return {"value": encode(result)}


def workspace_modules():
    names = set()
    for root in ROOTS:
        try:
            entries = os.listdir(root)
        except OSError:
            continue
        for e in entries:
            if e.endswith(".py") and e[:-3].isidentifier():
                names.add(e[:-3])
            elif e.isidentifier() and os.path.isdir(os.path.join(root, e)):
                names.add(e)
    return sorted(names)


def install_audit_hooks():
    blocked_events = {
        "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
        "ctypes.dlopen", "ctypes.dlsym", "ctypes.addressof", "ctypes.cdata",
        "ctypes.string_at", "ctypes.wstring_at", "ctypes.call_function",
    }
    realpath = os.path.realpath
    startswith = str.startswith
    PermError = PermissionError

    def hook(event, args):
        if event in blocked_events:
            raise PermError(f"arbor verifier: {event} is not allowed in code under test")
        if event == "import" and args and args[0] in ("ctypes", "_ctypes"):
            raise PermError("arbor verifier: ctypes is not allowed in code under test")
        if event == "open" and args:
            path = args[0]
            if isinstance(path, (str, bytes)):
                p = path.decode("utf-8", "replace") if isinstance(path, bytes) else path
                if "/proc/" in p or startswith(p, "/proc"):
                    r = realpath(p)
                    if r.endswith("/mem") or "/mem" in r.rsplit("/", 1)[-1]:
                        raise PermError("arbor verifier: process memory is not readable")

    sys.addaudithook(hook)


def prepare_request(req):
    """What the trusted side changed since its last request: mirrors, the
    environment, the working directory."""
    for key, data in req.get("classes", {}).items():
        SHIPPED_DEFS[int(key)] = data
    if req.get("mirror_reset"):
        MIRRORS.clear()
        MIRROR_IDS.clear()
        MIRROR_SENT.clear()

    if "mirrors" in req:
        apply_mirrors(req["mirrors"])
    for mid in req.get("mirror_drop", ()):
        obj = MIRRORS.pop(mid, None)
        if obj is not None:
            MIRROR_IDS.pop(id(obj), None)
        MIRROR_SENT.pop(mid, None)
    if "env" in req:
        for k, v in req["env"].get("set", {}).items():
            os.environ[str(k)] = str(v)
        for k in req["env"].get("unset", []):
            os.environ.pop(str(k), None)
    if "cwd" in req:
        try:
            os.chdir(req["cwd"])
        except OSError:
            pass
    global RANDOM_SENT
    if "random" in req:
        import random
        version, internal, gauss = req["random"]
        random.setstate((version, tuple(internal), gauss))
        RANDOM_SENT = random.getstate()


def serve():
    hello = read_frame()
    ROOTS[:] = [os.path.abspath(p) for p in hello.get("roots", ["/workspace"])]
    for p in ROOTS:
        if p not in sys.path:
            sys.path.append(p)
    if hello.get("cwd"):
        os.chdir(hello["cwd"])
    sys.argv[:] = ["arbor-subject"]
    sys.set_int_max_str_digits(0)
    capture = Capture()
    install_audit_hooks()
    write_frame({"id": hello.get("id", 0), "value": encode(sys.version_info[:3])})
    while True:
        try:
            req = read_frame()
        except EOFError:
            return
        if req.get("op") == "bye":
            write_frame({"id": req.get("id"), "value": None})
            return
        TABLE.release(req.get("rel", ()))
        reply = {"id": req.get("id")}
        try:
            prepare_request(req)
        except BaseException as e:
            reply["exc"] = exception_reply(e)
            write_frame(reply)
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                reply.update(handle_request(req, capture))
            except BaseException as e:  # the code under test may raise anything
                try:
                    reply["exc"] = exception_reply(e)
                except BaseException as inner:
                    reply["exc"] = {"str": f"[arbor: the exception could not be described: {inner!r}]",
                                    "t": {"std": ["builtins", "RuntimeError"]}, "args": {"T": []}}
        capture.collect(reply, caught)
        if RANDOM_SENT is not None and "random" in sys.modules:
            state = sys.modules["random"].getstate()
            if state != RANDOM_SENT:
                reply["random"] = [state[0], list(state[1]), state[2]]
                globals()["RANDOM_SENT"] = state
        if MIRRORS:
            changes, gone = mirror_changes()
            if changes:
                reply["mirrors"] = changes
            if gone:
                reply["mirrors_gone"] = gone
        try:
            write_frame(reply)
        except (TypeError, ValueError) as e:
            write_frame({"id": req.get("id"), "exc": {
                "str": f"[arbor: the answer could not be sent: {e!r}]",
                "t": {"std": ["builtins", "RuntimeError"]}, "args": {"T": []}}})


try:
    serve()
except BaseException:  # the subject's own failure: say so on the real stderr
    import traceback
    os.write(2, ("arbor subject failed:\n" + traceback.format_exc()).encode("utf-8", "replace"))
    raise
