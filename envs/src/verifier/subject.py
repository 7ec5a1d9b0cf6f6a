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
INT_DIGITS = 4000
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


def apply_mirrors(updates):
    for key, enc in updates.items():
        mid = int(key)
        new = rebuild(enc, [])
        old = MIRRORS.get(mid)
        if old is None:
            MIRRORS[mid] = new
            MIRROR_IDS[id(new)] = mid
        elif type(old) in (list, bytearray):
            old[:] = new
        else:
            old.clear()
            old.update(new)
    for key in updates:
        mid = int(key)
        MIRROR_SENT[mid] = json.dumps(mirror_state(mid), sort_keys=True)


def mirror_state(mid):
    return Encoder(top_mirror=mid).value(MIRRORS[mid])


def mirror_changes():
    out = {}
    for mid in MIRRORS:
        enc = mirror_state(mid)
        text = json.dumps(enc, sort_keys=True)
        if text != MIRROR_SENT.get(mid):
            out[str(mid)] = enc
            MIRROR_SENT[mid] = text
    return out


class Unshipper(pickle.Unpickler):
    def persistent_load(self, pid):
        kind, mid = pid
        if kind != "mirror" or mid not in MIRRORS:
            raise pickle.UnpicklingError(f"unknown persistent object {pid!r}")
        return MIRRORS[mid]


def type_ref(cls):
    """A class as the trusted side can name it: a built-in or standard
    library class by module and qualified name, anything else as a handle
    with its description (sent once)."""
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
    }


class Encoder:
    """Values as JSON: exact built-in types by value, everything else as a
    handle. `muts` are the objects rebuilt from the trusted side's mutable
    arguments of the current call: they are sent back by index."""

    def __init__(self, muts=(), top_mirror=None):
        self.muts = {id(m): i for i, m in enumerate(muts)}
        self.depth = 0
        self.top_mirror = top_mirror

    def value(self, v):
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            if abs(v) < 10**INT_DIGITS:
                return v
            return {"I": format(v, "x")}
        if t is float:
            if math.isfinite(v):
                return v
            return {"F": repr(v)}
        i = self.muts.get(id(v))
        if i is not None:
            return {"M": i}
        mid = MIRROR_IDS.get(id(v))
        if mid is not None and mid != self.top_mirror and MIRRORS.get(mid) is v:
            return {"MIR": mid}
        self.depth += 1
        try:
            if self.depth > 200:
                raise RecursionError("value nested too deeply")
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
        finally:
            self.depth -= 1
        return self.handle(v)

    def handle(self, v):
        t = type(v)
        if t is types.ModuleType:
            return {"H": TABLE.handle(v), "mod": v.__name__,
                    "pkg": hasattr(v, "__path__"), "ws": _from_workspace(v)}
        if isinstance(v, type):
            return type_ref(v)
        return {"H": TABLE.handle(v), "t": type_ref(t)}


def encode(v, muts=()):
    return Encoder(muts).value(v)


def rebuild(data, muts):
    """A value from the trusted side: plain data, handles, or a pickle of
    its own objects (rebuilt here). Mutable containers are recorded in
    `muts` under the number the trusted side gave them (`"m"`), before their
    items are rebuilt, so shared and cyclic references (`{"M": i}`) resolve."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is not dict or len(data) > 2:
        raise ValueError("malformed value")
    if "H" in data:
        return TABLE.get(data["H"])
    if "M" in data:
        return muts[data["M"]]
    if "MIR" in data:
        return MIRRORS[int(data["MIR"])]
    if "std" in data:
        module, qualname = data["std"]
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj
    m = data.get("m")

    def register(v):
        if m is not None:
            while len(muts) <= m:
                muts.append(None)
            muts[m] = v
        return v

    if "L" in data:
        v = register([])
        v.extend(rebuild(x, muts) for x in data["L"])
        return v
    if "D" in data:
        v = register({})
        for k, x in data["D"]:
            v[rebuild(k, muts)] = rebuild(x, muts)
        return v
    if "S" in data:
        v = register(set())
        v.update(rebuild(x, muts) for x in data["S"])
        return v
    if "BA" in data:
        return register(bytearray(base64.b64decode(data["BA"])))
    if "T" in data:
        return tuple(rebuild(x, muts) for x in data["T"])
    if "FS" in data:
        return frozenset(rebuild(x, muts) for x in data["FS"])
    if "B" in data:
        return base64.b64decode(data["B"])
    if "C" in data:
        return complex(rebuild(data["C"][0], muts), rebuild(data["C"][1], muts))
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
def function(code, name, qualname, module, defaults, kwdefaults, closure, globals_, doc):
    g = {"__name__": module, "__builtins__": __builtins__}
    g.update(dict(globals_))
    cells = tuple(types.CellType(v) for v in closure) if closure is not None else None
    f = types.FunctionType(marshal.loads(code), g, name, defaults, cells)
    f.__qualname__ = qualname
    f.__kwdefaults__ = kwdefaults
    f.__doc__ = doc
    f.__module__ = module
    return f
def klass(name, bases, qualname, module, meta):
    ns = {"__qualname__": qualname, "__module__": module}
    return (meta or type)(name, bases, ns)
def class_state(cls, state):
    for k, v in state:
        setattr(cls, k, v)
def module(name):
    return importlib.import_module(name)
'''


def make_support(lookup):
    mod = types.ModuleType("_arbor_subject_support")
    mod.__dict__["_lookup"] = lookup
    exec(compile(SUPPORT_SOURCE, "<arbor-support>", "exec"), mod.__dict__)
    sys.modules[mod.__name__] = mod
    return mod


SUPPORT = make_support(TABLE.get)
ROOTS = []


class Capture:
    """What code under test printed, warned and logged during one request:
    sent back with the answer, so the trusted side sees it where a test
    expects it (captured stdout, assertWarns, assertLogs)."""

    def __init__(self):
        self.out = io.StringIO()
        self.err = io.StringIO()
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
        buf.seek(0)
        buf.truncate()
        if len(text) > OUTPUT_CAP:
            text = text[:OUTPUT_CAP] + f"\n[arbor: {len(text) - OUTPUT_CAP} characters dropped]\n"
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


def exception_reply(e):
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
    return {"H": TABLE.handle(e), "t": type_ref(cls), "args": args,
            "str": text[:20000], "tb": tb[-20000:]}


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
    "index": lambda a: a.__index__(), "complex": complex, "bytes": bytes,
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
    args = rebuild(req["args"], [])
    kwargs = {"cwd": req.get("cwd") or None, "shell": bool(req.get("shell")),
              "stdin": subprocess.DEVNULL, "capture_output": True}
    if req.get("env") is not None:
        kwargs["env"] = {str(k): str(v) for k, v in rebuild(req["env"], []).items()}
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


def handle_request(req, capture):
    op = req["op"]
    if op == "import":
        return {"value": encode(importlib.import_module(req["name"]))}
    if op == "modules":
        return {"value": encode(workspace_modules())}
    if op == "run":
        return {"value": run_program(req)}
    muts = []
    target = rebuild(req["target"], muts) if "target" in req else None
    args = [rebuild(a, muts) for a in req.get("args", [])]
    kwargs = {str(k): rebuild(v, muts) for k, v in req.get("kwargs", [])}
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
    elif op == "next_batch":
        result = []
        for _ in range(int(args[0])):
            try:
                result.append(next(target))
            except StopIteration:
                break
        return {"items": encode(result, muts), "mut": [encode_state(m, muts) for m in muts]}
    else:
        raise ValueError(f"unknown operation {op!r}")
    return {"value": encode(result, muts), "mut": [encode_state(m, muts) for m in muts]}


def encode_state(obj, muts):
    """The state of a rebuilt mutable argument after a call, for the trusted
    side to copy back into its original (mutable containers only)."""
    enc = Encoder(muts)
    enc.muts.pop(id(obj), None)
    try:
        return enc.value(obj)
    except RecursionError:
        return None


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
        "gc.get_objects", "gc.get_referrers", "gc.get_referents",
        "sys.settrace", "sys.setprofile", "sys._current_frames",
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
        if "mirrors" in req:
            apply_mirrors(req["mirrors"])
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
        if MIRRORS:
            changes = mirror_changes()
            if changes:
                reply["mirrors"] = changes
        try:
            write_frame(reply)
        except (TypeError, ValueError) as e:
            write_frame({"id": req.get("id"), "exc": {
                "str": f"[arbor: the answer could not be sent: {e!r}]",
                "t": {"std": ["builtins", "RuntimeError"]}, "args": {"T": []}}})


serve()
