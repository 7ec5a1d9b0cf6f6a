"""The trusted side of the verifier's process boundary (see subject.py).

The hidden checks run in this interpreter, which never executes workspace
code. Everything of the workspace's is reached through the channel to the
subject process, and arrives here as either

* plain data (exact built-in types, and a few standard-library value types
  rebuilt here by this side's own constructors: Decimal, Fraction, dates), or
* an opaque handle, wrapped in a proxy whose attribute access, calls,
  operators, iteration and exceptions are executed in the subject.

Importing a workspace module yields a proxy module (`WorkspaceFinder`, last
on `sys.meta_path`); a program a check starts (`subprocess`, `os.system`)
runs in the subject (`RemotePopen`). What code under test prints, warns and
logs comes back with each answer and is replayed here, where tests look for
it.

The channel is asymmetric: the subject never receives a reference to an
object of this side. Arguments cross as plain data (mutable containers are
copied back after the call, so in-place changes show), as the handles this
side received, or as a pickle of this side's own objects (test doubles,
callbacks, standard-library values), which the subject rebuilds and runs
itself; whatever they capture becomes visible to code under test.

Every answer is a claim of the code under test; this side decides what the
claims mean. In strict mode (the bundled task families) a proxy cannot be
compared here (==, !=, <, ...: the expected value would be handed to the
code under test to judge), and instances of subclasses of built-in types
are refused outright: checks compare plain values, with this side's
semantics. Calls, attributes, len(), `in`, bool() and hash() of the code's
own objects are the API under test and return claims like any call. In upstream mode (imported test suites) comparisons of proxies
are evaluated with the subject's semantics, as the upstream suite expects.

This file is long because it is one embedded script (it is mounted into the
sandbox as is): the channel, the codec, the proxies and the import and
program routing belong together.
"""

import base64
import importlib
import importlib.machinery
import io
import json
import marshal
import math
import os
import pickle
import select
import subprocess
import sys
import types
import warnings
import weakref

MAX_FRAME = 64 << 20
# Ints past this many digits travel as hex (decimal parsing is quadratic).
INT_LIMIT = 10**4000
# Containers both sides hold are compared at every request while they have
# at most this many items; bigger ones only at requests that name them.
SMALL_MIRROR = 1000
STDLIB = frozenset(sys.stdlib_module_names) | {"builtins"}


class BoundaryError(Exception):
    """Something a check did cannot cross the verifier's process boundary."""


class SubjectError(BoundaryError):
    """The subject process (code under test) crashed, hung or broke the
    protocol; every later use of it fails with this error too."""


class SubjectExited(SubjectError):
    """The subject process ended: its end of the channel closed."""


def blame(exc):
    """Mark `exc` as caused by the code under test (see `blame_of`) and
    return it."""
    try:
        object.__getattribute__(exc, "__dict__")["_arbor_blame"] = "subject"
    except Exception:
        pass
    return exc


def blame_of(exc):
    """What a check's failure with `exc` is blamed on, as the runner reports
    it (`"blame"` of a test in the result line): "subject_exited" when the
    subject process ended under it, "subject" when the code under test
    caused it otherwise (an exception raised there, a protocol break, a
    value the strict checks refuse), else None. Read from the exception's
    type and the mark `blame` left, never from its text."""
    if isinstance(exc, SubjectExited):
        return "subject_exited"
    if isinstance(exc, SubjectError):
        return "subject"
    try:
        marked = object.__getattribute__(exc, "__dict__").get("_arbor_blame")
    except Exception:
        marked = None
    return "subject" if marked == "subject" else None


class RemoteKeyboardInterrupt(Exception):
    """KeyboardInterrupt raised by code under test (never this side's)."""


class RemoteGeneratorExit(Exception):
    """GeneratorExit raised by code under test."""


MAPPED_EXCEPTIONS = {
    KeyboardInterrupt: RemoteKeyboardInterrupt,
    GeneratorExit: RemoteGeneratorExit,
}


class Channel:
    """Request/response over the socket at fd 3, with a deadline."""

    def __init__(self, fd, deadline):
        self.fd = fd
        self.deadline = deadline
        self.next_id = 1
        self.dead = None
        # Whether the channel died because the subject process ended.
        self.dead_exited = False
        self.calls = 0

    def _read_exact(self, n):
        chunks = []
        while n:
            left = self.deadline - _monotonic()
            if left <= 0:
                raise SubjectError("the code under test did not answer before the checks' time ran out")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, min(n, 1 << 20))
            if not chunk:
                raise SubjectExited("the code under test exited (its process ended)")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def send(self, msg):
        body = json.dumps(msg, separators=(",", ":")).encode("utf-8", "surrogatepass")
        data = memoryview(len(body).to_bytes(4, "big") + body)
        while data:
            left = self.deadline - _monotonic()
            if left <= 0:
                raise SubjectError("the code under test stopped reading before the checks' time ran out")
            _, ready, _ = select.select([], [self.fd], [], left)
            if ready:
                try:
                    n = os.write(self.fd, data)
                except BrokenPipeError:
                    raise SubjectExited("the code under test exited (its process ended)") from None
                data = data[n:]

    def receive(self):
        n = int.from_bytes(self._read_exact(4), "big")
        if n > MAX_FRAME:
            raise SubjectError(f"the code under test sent a frame of {n} bytes (limit {MAX_FRAME})")
        body = self._read_exact(n)
        try:
            msg = json.loads(body.decode("utf-8", "surrogatepass"), parse_constant=_no_constant)
        except (ValueError, RecursionError) as e:
            raise SubjectError(f"the code under test broke the protocol: {e}") from None
        if type(msg) is not dict:
            raise SubjectError("the code under test broke the protocol: a frame is not an object")
        return msg

    def request(self, msg):
        if self.dead is not None:
            raise (SubjectExited if self.dead_exited else SubjectError)(self.dead)
        msg["id"] = self.next_id
        self.next_id += 1
        self.calls += 1
        try:
            self.send(msg)
            reply = self.receive()
        except SubjectError as e:
            self.dead = str(e)
            self.dead_exited = isinstance(e, SubjectExited)
            raise
        if reply.get("id") != msg["id"]:
            self.dead = "the code under test broke the protocol (an answer to another request)"
            raise SubjectError(self.dead)
        return reply


def _no_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


_monotonic = __import__("time").monotonic


class Client:
    """The one connection to the subject: requests, handle bookkeeping,
    proxies and the side channels."""

    def __init__(self, channel, strict):
        self.channel = channel
        self.strict = strict
        self.proxies = weakref.WeakValueDictionary()
        self.classes = {}
        self.released = set()
        self.modules = {}
        # Mutable containers of this side that shipped code (a callback, a
        # test double) captured: each has a twin in the subject, and the two
        # are synchronised by value at every request and answer.
        self.mirror_ids = {}
        self.mirror_objs = {}
        self.mirror_seen = {}
        self.mirror_reset = False
        self.next_mirror = 0
        # The environment and cwd the subject last heard of: a test that
        # changes either (EnvironmentVarGuard, chdir) changes it there too.
        # This side's classes shipped to the subject, by number (each is
        # defined there once; instances coming back are rebuilt with them).
        self.shipped = {}
        self.shipped_classes = {}
        # This side's functions shipped by value, by number: one that comes
        # back is this side's own again (identity holds).
        self.shipped_fns = {}
        self.shipped_fn_ids = {}
        self.pending_classes = []
        # Mirrors the request being built names (checked for changes even
        # when they are large; see `mirror_updates`).
        self.referenced = set()
        self.sent_env = dict(os.environ)
        # The global random generator's state: a test that seeds it here
        # seeds the code under test's too, and what the code draws there
        # advances it here (the module is one generator in upstream runs).
        self.sent_random = None
        self.sent_cwd = os.getcwd()
        # Workspace modules imported so far (a second import of one is a
        # fresh import: import_fresh_module).
        self.imported = set()

    def ship_class(self, cls):
        """The number of `cls` (a class of the checks) in the subject; its
        definition goes with the next request."""
        n = self.shipped.get(id(cls))
        if n is None or self.shipped_classes.get(n) is not cls:
            n = len(self.shipped_classes) + 1
            self.shipped[id(cls)] = n
            self.shipped_classes[n] = cls
            self.pending_classes.append(n)
        return n

    def class_definitions(self):
        """Definitions of the classes numbered since the last request
        (defining one may number more)."""
        out = {}
        while self.pending_classes:
            n = self.pending_classes.pop(0)
            cls = self.shipped_classes[n]
            out[str(n)] = base64.b64encode(ship(self, cls, define=True)).decode("ascii")
        return out

    def define_class(self, cls):
        """Define `cls`, a test's subclass of a workspace class, in the
        subject (by value, like a test double) and make it the proxy class
        of the class created there."""
        own = type.__getattribute__(cls, "__dict__")
        if own.get("_arbor_class_h") is not None:
            return own["_arbor_class_h"]
        reply = self.request({"op": "define", "target": {"P": base64.b64encode(ship(self, cls, define=True)).decode("ascii")}})
        value = reply.get("value")
        if type(value) is not dict or type(value.get("H")) is not int:
            raise SubjectError("the code under test broke the protocol (a defined class)")
        h = value["H"]
        type.__setattr__(cls, "_arbor_class_h", h)
        self.classes[h] = cls
        return h

    def reset_mirrors(self):
        """Forget the mirrors (at the end of a test: its test doubles and
        captured containers are gone; later ones are mirrored afresh)."""
        if self.mirror_objs:
            self.mirror_ids.clear()
            self.mirror_objs.clear()
            self.mirror_seen.clear()
            self.mirror_reset = True

    # -- mirrors -----------------------------------------------------------
    def mirror(self, obj):
        mid = self.mirror_ids.get(id(obj))
        if mid is None:
            self.next_mirror += 1
            mid = self.next_mirror
            self.mirror_ids[id(obj)] = mid
            self.mirror_objs[mid] = obj
            self.mirror_seen[mid] = None
        return mid

    def _mirror_state(self, mid):
        obj = self.mirror_objs[mid]
        t = type(obj)
        if t in (list, dict, set, bytearray):
            item = lambda x: self.encode(x, 1)  # noqa: E731
            if t is list:
                enc = {"L": [item(x) for x in obj]}
            elif t is dict:
                enc = {"D": [[item(k), item(x)] for k, x in obj.items()]}
            elif t is set:
                enc = {"S": [item(x) for x in obj]}
            else:
                enc = {"BA": base64.b64encode(bytes(obj)).decode("ascii")}
        elif t is object:
            enc = {"SENT": True}
        elif t in ITER_TYPES:
            seq, pos = iter_state(obj)
            enc = {"ITER": [self.encode(seq, 1), pos]}
        elif t in (io.BytesIO, io.StringIO) and obj.closed:
            enc = {"IO": ["b" if t is io.BytesIO else "s", None, 0]}
        elif t is io.BytesIO:
            enc = {"IO": ["b", base64.b64encode(obj.getvalue()).decode("ascii"), obj.tell()]}
        elif t is io.StringIO:
            enc = {"IO": ["s", obj.getvalue(), obj.tell()]}
        else:
            enc = {"OBJ": {"D": [[k, self.encode(x, 1)] for k, x in obj.__dict__.items()]}}
        return enc

    def dead_mirrors(self):
        """Mirrors this side no longer refers to (only the mirror table
        holds them): forgotten once their last changes are sent, so that a
        test that makes thousands of test doubles does not pay for all of
        them at every request."""
        # Held only by the table: the dict, the loop variable, the items
        # pair and getrefcount's own argument.
        return [mid for mid, obj in self.mirror_objs.items()
                if sys.getrefcount(obj) <= 4 and self.mirror_seen.get(mid) is not None]

    def forget_mirrors(self, dead):
        for mid in dead:
            obj = self.mirror_objs.pop(mid)
            self.mirror_ids.pop(id(obj), None)
            self.mirror_seen.pop(mid, None)
        return dead

    def mirror_updates(self):
        out = {}
        done = set()
        while True:
            # Encoding one mirror may register others (a test double's
            # attributes), which must travel in the same request.
            pending = [m for m in self.mirror_objs if m not in done]
            if not pending:
                return out
            for mid in pending:
                done.add(mid)
                if self._worth_checking(mid):
                    try:
                        self._mirror_update(mid, out)
                    except BoundaryError:
                        # Its state cannot cross: this request fails, and the
                        # pair is forgotten so that later ones do not.
                        self.forget_mirrors([mid])
                        self.mirror_seen.pop(mid, None)
                        raise

    def _worth_checking(self, mid):
        """Mirrors the next request names are always checked; others only
        while small (so a test holding big containers the subject also
        holds does not pay for them at every request)."""
        if mid in self.referenced or self.mirror_seen.get(mid) is None:
            return True
        obj = self.mirror_objs[mid]
        try:
            return len(obj) <= SMALL_MIRROR
        except TypeError:
            return True

    def _mirror_update(self, mid, out):
        """Add mirror `mid`'s state to `out` if it changed here since the
        twins were last equal (with its class, for a test double the subject
        has not seen). Nested containers are mirrors of their own, so a
        change is a change of this object's shallow shape."""
        obj = self.mirror_objs[mid]
        shape = mirror_shape(obj)
        if shape == self.mirror_seen[mid]:
            return
        enc = self._mirror_state(mid)
        if self.mirror_seen[mid] is None and "OBJ" in enc:
            enc = dict(enc, cls={"P": base64.b64encode(ship(self, type(obj))).decode("ascii")})
        out[str(mid)] = enc
        self.mirror_seen[mid] = shape

    def apply_mirrors(self, updates):
        if type(updates) is not dict:
            raise SubjectError("the code under test broke the protocol (mirrored values)")
        for key, enc in updates.items():
            try:
                mid = int(key)
                orig = self.mirror_objs[mid]
            except (ValueError, KeyError):
                raise SubjectError("the code under test broke the protocol (an unknown mirror)") from None
            if type(orig) is object:
                continue
            if type(orig) in ITER_TYPES:
                try:
                    pos = enc["ITER"][1]
                    if pos is None:
                        for _ in orig:
                            pass
                    else:
                        orig.__setstate__(int(pos))
                except (KeyError, TypeError, ValueError, IndexError):
                    raise SubjectError("the code under test broke the protocol (a mirrored iterator)") from None
                self.mirror_seen[mid] = mirror_shape(orig)
                continue
            if type(orig) in (io.BytesIO, io.StringIO):
                try:
                    kind, content, pos = enc["IO"]
                    if content is None or orig.closed:
                        continue
                    data = base64.b64decode(content) if kind == "b" else str(content)
                    orig.seek(0)
                    orig.truncate()
                    orig.write(data)
                    orig.seek(int(pos))
                except (KeyError, TypeError, ValueError) as e:
                    raise SubjectError(f"the code under test broke the protocol (a mirrored file: {e})") from None
            elif type(orig) in (list, dict, set, bytearray):
                new = self.decode(enc)
                if type(new) is not type(orig):
                    raise SubjectError("the code under test broke the protocol (a mirror changed type)")
                if type(orig) in (list, bytearray):
                    orig[:] = new
                else:
                    orig.clear()
                    orig.update(new)
            else:
                new = self.decode(enc.get("OBJ") if type(enc) is dict else None)
                if type(new) is not dict:
                    raise SubjectError("the code under test broke the protocol (a mirrored object)")
                orig.__dict__.clear()
                orig.__dict__.update(new)
            self.mirror_seen[mid] = mirror_shape(orig)

    # -- requests --------------------------------------------------------
    def request(self, msg):
        if self.released:
            msg["rel"] = sorted(self.released)
            self.released.clear()
        if self.mirror_reset:
            msg["mirror_reset"] = True
            self.mirror_reset = False
        # Mirrors this side let go of still send what was done to them last
        # (`module.REGISTRY.add(x)` drops the twin as soon as it is done).
        dead = self.dead_mirrors() if self.mirror_objs else []
        # Class definitions may make mirrors (a class attribute's list) and
        # mirrors may number classes (a test double's): until neither does.
        classes, mirrors = {}, {}
        while True:
            if self.pending_classes:
                classes.update(self.class_definitions())
            if self.mirror_objs:
                mirrors.update(self.mirror_updates())
            if not self.pending_classes:
                break
        self.referenced.clear()
        if dead:
            msg["mirror_drop"] = self.forget_mirrors(dead)
        if classes:
            msg["classes"] = classes
        if mirrors:
            msg["mirrors"] = mirrors
        env = dict(os.environ)
        if env != self.sent_env:
            msg["env"] = {"set": {k: v for k, v in env.items() if self.sent_env.get(k) != v},
                          "unset": [k for k in self.sent_env if k not in env]}
            self.sent_env = env
        rnd = sys.modules.get("random")
        if rnd is not None:
            state = rnd.getstate()
            if state != self.sent_random:
                msg["random"] = [state[0], list(state[1]), state[2]]
                self.sent_random = state
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        if cwd is not None and cwd != self.sent_cwd:
            msg["cwd"] = cwd
            self.sent_cwd = cwd
        reply = self.channel.request(msg)
        try:
            if "mirrors" in reply:
                self.apply_mirrors(reply["mirrors"])
            if "random" in reply:
                try:
                    version, internal, gauss = reply["random"]
                    state = (int(version), tuple(int(x) for x in internal), gauss)
                    import random
                    random.setstate(state)
                    self.sent_random = state
                except (TypeError, ValueError, OverflowError):
                    raise SubjectError("the code under test broke the protocol (a random state)") from None
            if "mirrors_gone" in reply:
                # The subject no longer holds these twins: forget the pairs
                # (passed again, an object is mirrored afresh).
                gone = reply["mirrors_gone"]
                if type(gone) is not list or not all(type(m) is int for m in gone):
                    raise SubjectError("the code under test broke the protocol (forgotten mirrors)")
                self.forget_mirrors([m for m in gone if m in self.mirror_objs])
            self.side_channels(reply)
            if "exc" in reply:
                raise self.exception(reply["exc"])
            return reply
        except SubjectError as e:
            self.channel.dead = str(e)
            raise

    def op(self, op, target, /, *args, **kwargs):
        msg = {"op": op, "target": self.encode(target), "args": [self.encode(a) for a in args]}
        if kwargs:
            msg["kwargs"] = [[k, self.encode(v)] for k, v in kwargs.items()]
        return self.decode(self.request(msg).get("value"))

    # -- side channels ---------------------------------------------------
    def side_channels(self, reply):
        out, err = reply.get("out"), reply.get("err")
        if type(out) is str and out:
            sys.stdout.write(out)
        if type(err) is str and err:
            sys.stderr.write(err)
        for w in reply.get("warn") or ():
            try:
                category = self.decode_type(w[0])
                if not (isinstance(category, type) and issubclass(category, Warning)):
                    category = UserWarning
                warnings.warn_explicit(str(w[1]), category, str(w[2]), int(w[3]))
            except (TypeError, ValueError, IndexError):
                raise SubjectError("the code under test broke the protocol (a malformed warning)")
        for r in reply.get("log") or ():
            import logging
            try:
                name, level, msg, path, line, func = r
                logger = logging.getLogger(str(name)) if name != "root" else logging.getLogger()
                if logger.isEnabledFor(int(level)):
                    logger.handle(logging.makeLogRecord({
                        "name": str(name), "levelno": int(level),
                        "levelname": logging.getLevelName(int(level)), "msg": str(msg),
                        "args": None, "pathname": str(path), "lineno": int(line),
                        "funcName": str(func)}))
            except (TypeError, ValueError):
                raise SubjectError("the code under test broke the protocol (a malformed log record)")

    # -- values from the subject ----------------------------------------
    def decode(self, data, depth=0):
        if data is None or type(data) in (bool, str, float):
            return data
        if type(data) is int:
            return data
        if depth > 200:
            raise SubjectError("the code under test sent a value nested too deeply")
        if type(data) is not dict:
            raise SubjectError("the code under test broke the protocol (a malformed value)")
        d = depth + 1
        try:
            if "RMIR" in data:
                return self.reverse_mirror(data, d)
            if "L" in data:
                return [self.decode(x, d) for x in data["L"]]
            if "T" in data:
                return tuple(self.decode(x, d) for x in data["T"])
            if "D" in data:
                out = {}
                for k, v in data["D"]:
                    out[self.decode(k, d)] = self.decode(v, d)
                return out
            if "S" in data:
                return {self.decode(x, d) for x in data["S"]}
            if "FS" in data:
                return frozenset(self.decode(x, d) for x in data["FS"])
            if "B" in data:
                return base64.b64decode(data["B"], validate=True)
            if "BA" in data:
                return bytearray(base64.b64decode(data["BA"], validate=True))
            if "C" in data:
                re_, im = data["C"]
                return complex(float(re_), float(im))
            if "I" in data:
                return int(data["I"], 16)
            if "F" in data:
                if data["F"] not in ("nan", "inf", "-inf"):
                    raise ValueError(data["F"])
                return float(data["F"])
            if "R" in data:
                start, stop, step = (int(x) for x in data["R"])
                return range(start, stop, step)
            if "E" in data:
                return {"Ellipsis": Ellipsis, "NotImplemented": NotImplemented}[data["E"]]
            if "MIR" in data:
                return self.mirror_objs[int(data["MIR"])]
            if "X" in data:
                return rebuild_std_value(*data["X"])
            if "TCLS" in data:
                return self.shipped_classes[int(data["TCLS"])]
            if "TFN" in data:
                return self.shipped_fns[int(data["TFN"])]
            if "TOBJ" in data:
                return self.rebuild_shipped(data["TOBJ"], d)
            if "std" in data or "cls" in data or ("H" in data and "t" not in data and "mod" not in data):
                return self.decode_type(data)
            if "mod" in data:
                return self.module_proxy(data)
            if "H" in data:
                return self.proxy(int(data["H"]), self.decode_type(data["t"]))
        except SubjectError:
            raise
        except (KeyError, IndexError, TypeError, ValueError, ArithmeticError) as e:
            raise SubjectError(f"the code under test broke the protocol (a malformed value: {e!r})") from None
        raise SubjectError("the code under test broke the protocol (an unknown value tag)")

    def reverse_mirror(self, data, depth):
        """A container of the subject's, mirrored here (its twin): a test
        that changes it changes it there."""
        mid = int(data["RMIR"])
        if mid >= 0:
            raise SubjectError("the code under test broke the protocol (a mirror number)")
        existing = self.mirror_objs.get(mid)
        if existing is not None:
            return existing
        obj = self.decode({k: v for k, v in data.items() if k != "RMIR"}, depth)
        if type(obj) not in (list, dict, set, bytearray):
            raise SubjectError("the code under test broke the protocol (a mirrored value)")
        self.mirror_objs[mid] = obj
        self.mirror_ids[id(obj)] = mid
        self.mirror_seen[mid] = mirror_shape(obj)
        return obj

    def rebuild_shipped(self, data, depth):
        """An instance of one of this side's own classes (shipped to the
        subject) coming back: rebuilt here from its data, by this side's own
        class (built-in value base and `__dict__`)."""
        n, base_value, state = data
        cls = self.shipped_classes[int(n)]
        base = next((b for b in cls.__mro__ if b in _BUILTIN_VALUE_BASES), None)
        if base is not None and base_value is not None:
            obj = base.__new__(cls, self.decode(base_value, depth))
        else:
            obj = object.__new__(cls)
        if state is not None and hasattr(obj, "__dict__"):
            obj.__dict__.update(self.decode(state, depth))
        return obj

    def decode_type(self, ref):
        if type(ref) is not dict:
            raise SubjectError("the code under test broke the protocol (a malformed class)")
        if "std" in ref:
            module, qualname = ref["std"]
            return std_class(str(module), str(qualname))
        if "TCLS" in ref:
            return self.shipped_classes[int(ref["TCLS"])]
        h = int(ref["H"])
        cls = self.classes.get(h)
        if cls is not None:
            return cls
        desc = ref.get("cls")
        if type(desc) is not dict:
            # Described in an answer this side did not read through (an
            # error cut it short): ask again.
            desc = self.request({"op": "describe", "target": {"H": h}}).get("value")
            if type(desc) is not dict:
                raise SubjectError(f"the code under test broke the protocol (an undescribed class {h})")
        cls = make_proxy_class(self, h, desc)
        self.classes[h] = cls
        self.proxies[h] = cls
        return cls

    def proxy(self, h, cls):
        self.released.discard(h)
        p = self.proxies.get(h)
        if p is not None and not isinstance(p, type):
            return p
        if isinstance(cls, type) and issubclass(cls, BaseException):
            if not getattr(cls, "_arbor_remote", False):
                cls = opaque_class(self, cls)
            p = BaseException.__new__(cls)
            p.__dict__["_arbor_h"] = h
        else:
            if not (isinstance(cls, type) and getattr(cls, "_arbor_remote", False)):
                cls = opaque_class(self, cls)
            p = object.__new__(cls)
            object.__setattr__(p, "_arbor_h", h)
        self.proxies[h] = p
        weakref.finalize(p, self.released.add, h)
        return p

    def module_proxy(self, data):
        name = str(data["mod"])
        h = int(data["H"])
        m = self.modules.get(name)
        if m is not None and m._arbor_h == h:
            return m
        m = sys.modules.get(name)
        if isinstance(m, ProxyModule) and m._arbor_h == h:
            return m
        m = ProxyModule(self, name, h, bool(data.get("pkg")))
        self.modules[name] = m
        return m

    def exception(self, data):
        if type(data) is not dict:
            return SubjectError("the code under test broke the protocol (a malformed exception)")
        text = data.get("str")
        text = text if type(text) is str else ""
        try:
            cls = self.decode_type(data.get("t"))
            args = self.decode(data.get("args", {"T": []}))
        except SubjectError as e:
            return e
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            cls = RuntimeError
        cls = MAPPED_EXCEPTIONS.get(cls, cls)
        if not isinstance(args, tuple):
            args = (args,)
        if getattr(cls, "_arbor_remote", False):
            exc = BaseException.__new__(cls)
            exc.args = args
            exc.__dict__["_arbor_str"] = text
            if "H" in data:
                exc.__dict__["_arbor_h"] = int(data["H"])
        else:
            try:
                exc = cls(*args)
            except Exception:
                exc = cls.__new__(cls)
                exc.args = args
            if type(exc) is not cls and not isinstance(exc, cls):
                exc = cls.__new__(cls)
                exc.args = args
        if data.get("suppress") is True:
            exc.__suppress_context__ = True
        if type(data.get("cause")) is dict:
            cause = self.exception(data["cause"])
            if isinstance(cause, BaseException):
                exc.__cause__ = cause
        tb = data.get("tb")
        if type(tb) is str and tb:
            try:
                exc.add_note("[raised in the code under test]\n" + tb.rstrip())
            except (AttributeError, TypeError):
                pass
        return blame(exc)

    # -- values to the subject -------------------------------------------
    def encode(self, v, depth=0):
        """`v` as the subject will rebuild it: plain immutable data by value,
        proxies as their handles, this side's mutable containers and test
        doubles as mirrors (twins kept equal at every request), anything
        else of this side's as a pickle the subject rebuilds."""
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            return v if -INT_LIMIT < v < INT_LIMIT else {"I": format(v, "x")}
        if t is float:
            return v if math.isfinite(v) else {"F": repr(v)}
        h = remote_handle(v)
        if h is not None:
            return {"H": h}
        mid = self.mirror_ids.get(id(v))
        if mid is not None and self.mirror_objs.get(mid) is v:
            self.referenced.add(mid)
            return {"MIR": mid}
        if depth > 200:
            raise BoundaryError("a value passed to code under test is nested too deeply")
        d = depth + 1
        if t in (list, dict, set, bytearray, io.BytesIO, io.StringIO) or t in ITER_TYPES:
            mid = self.mirror(v)
            self.referenced.add(mid)
            return {"MIR": mid}
        if t is tuple:
            return {"T": [self.encode(x, d) for x in v]}
        if t is frozenset:
            return {"FS": [self.encode(x, d) for x in v]}
        if t is bytes:
            return {"B": base64.b64encode(v).decode("ascii")}
        if t is complex:
            return {"C": [v.real, v.imag]}
        if t is range:
            return {"R": [v.start, v.stop, v.step]}
        if v is Ellipsis:
            return {"E": "Ellipsis"}
        if v is NotImplemented:
            return {"E": "NotImplemented"}
        if isinstance(v, type) and (v.__module__ == "builtins" or v.__module__.split(".")[0] in STDLIB) \
                and "<locals>" not in v.__qualname__ and not v.__module__.startswith("arbor_check") \
                and _named(v):
            return {"std": [v.__module__, v.__qualname__]}
        if isinstance(v, type) and getattr(v, "_arbor_subclass_of", None) is not None:
            return {"H": self.define_class(v)}
        return {"P": base64.b64encode(ship(self, v)).decode("ascii")}



# Built-in iterators over built-in sequences: mirrored with their position,
# so that what the code under test consumes is consumed here too.
ITER_TYPES = (type(iter([])), type(iter(())), type(iter(range(0))), type(iter(range(1 << 64))))


def iter_state(it):
    """(sequence, position) of a built-in iterator, position None once it
    is exhausted."""
    red = it.__reduce__()
    if len(red) < 3:
        return red[1][0], None
    return red[1][0], red[2]


def mirror_shape(obj):
    """What must stay the same for a mirror to be unchanged: the identities
    of its items (keys and values), or a file's content and position."""
    t = type(obj)
    if t is object:
        return ()
    if t in ITER_TYPES:
        return iter_state(obj)[1]
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


def remote_handle(v):
    """The subject's handle for a proxy, or None for an object of this side."""
    try:
        if isinstance(v, ProxyModule):
            return v._arbor_h
        t = type(v)
        if getattr(t, "_arbor_remote", False):
            if isinstance(v, type):
                return None
            h = v.__dict__.get("_arbor_h") if isinstance(v, BaseException) else object.__getattribute__(v, "_arbor_h")
            return h
        if isinstance(v, type) and getattr(v, "_arbor_remote", False):
            return type.__getattribute__(v, "__dict__").get("_arbor_class_h")
    except (AttributeError, KeyError):
        return None
    return None


# -- standard-library values rebuilt on this side ---------------------------
def rebuild_std_value(kind, payload):
    """A standard-library value from its data, built by this side's own
    constructors (the subject only supplies numbers and strings)."""
    import datetime
    import decimal
    import fractions
    if kind == "Decimal":
        return decimal.Decimal(str(payload))
    if kind == "Fraction":
        return fractions.Fraction(int(payload[0]), int(payload[1]))
    if kind == "date":
        return datetime.date(*(int(x) for x in payload))
    if kind == "timedelta":
        return datetime.timedelta(days=int(payload[0]), seconds=int(payload[1]),
                                  microseconds=int(payload[2]))
    if kind in ("datetime", "time"):
        *fields, offset, fold = payload
        tz = None if offset is None else datetime.timezone(datetime.timedelta(seconds=float(offset)))
        cls = datetime.datetime if kind == "datetime" else datetime.time
        return cls(*(int(x) for x in fields), tzinfo=tz, fold=int(fold))
    raise ValueError(f"unknown value kind {kind!r}")


def std_class(module, qualname):
    top = module.split(".")[0]
    if module != "builtins" and top not in STDLIB:
        raise SubjectError(f"the code under test named {module}.{qualname} as a standard-library class")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return opaque_std(module, qualname)
    if not isinstance(obj, type):
        raise SubjectError(f"the code under test named {module}.{qualname}, which is not a class")
    return obj


_OPAQUE = {}


def opaque_std(module, qualname):
    """A stand-in class for a standard-library class this side cannot name
    (an internal iterator type, say)."""
    key = (module, qualname)
    cls = _OPAQUE.get(key)
    if cls is None:
        ns = {"__module__": module, "__qualname__": qualname, "__slots__": ()}
        ns.update(OPTIONAL_DUNDERS)
        cls = ProxyMeta(qualname.split(".")[-1], (ProxyObject,), ns)
        _OPAQUE[key] = cls
    return cls


def opaque_class(client, std):
    """The proxy type for instances (living in the subject) of a class of
    this side's standard library: a proxy class that answers isinstance
    checks against the real class."""
    key = ("std", std)
    cls = _OPAQUE.get(key)
    if cls is None:
        if issubclass(std, BaseException):
            bases = (RemoteException, std)
            ns = {"__module__": std.__module__, "__qualname__": std.__qualname__}
        else:
            bases = (ProxyObject,)
            ns = {"__module__": std.__module__, "__qualname__": std.__qualname__, "__slots__": ()}
            ns.update(dunders_of(std))
        try:
            cls = ProxyMeta(std.__name__, bases, ns)
        except TypeError:
            cls = ProxyMeta(std.__name__, (ProxyObject,), dict(dunders_of(std), __slots__=()))
        type.__setattr__(cls, "_arbor_std", std)
        _OPAQUE[key] = cls
    return cls


# -- proxies ----------------------------------------------------------------
CLIENT = None  # set by connect()


def _client():
    if CLIENT is None:
        raise BoundaryError("the verifier's channel to the code under test is not open")
    return CLIENT


def _strict_refuse(self, what):
    cls = type(self)
    raise blame(BoundaryError(
        f"strict checks compare plain values; {what} of a {cls.__qualname__} from the code under test "
        "is not decided on the trusted side (return plain data: int, float, str, list, dict, ...)"))


class ProxyMeta(type):
    """Metaclass of proxy classes: constructing one constructs the object in
    the subject; class attributes are the subject's."""

    def __new__(mcls, name, bases, ns, **kw):
        for b in bases:
            if getattr(b, "_arbor_remote", False) and getattr(b, "_arbor_class_h", None) is not None \
                    and not ns.get("_arbor_remote"):
                ns["_arbor_subclass_of"] = b
        cls = super().__new__(mcls, name, bases, ns, **kw)
        return cls

    def __call__(cls, /, *args, **kwargs):
        h = type.__getattribute__(cls, "__dict__").get("_arbor_class_h")
        if h is None:
            if getattr(cls, "_arbor_subclass_of", None) is None:
                raise BoundaryError(f"{cls.__qualname__} cannot be constructed on the trusted side")
            # A test's subclass of a workspace class: defined, like any test
            # double, in the subject, where its instances live.
            _client().define_class(cls)
        return _client().op("call", cls, *args, **kwargs)

    def __getattr__(cls, name):
        if name.startswith(("_arbor", "_abc_", "__pytest", "_pytest")) or name in ("__wrapped__", "__signature__"):
            raise AttributeError(name)
        h = type.__getattribute__(cls, "__dict__").get("_arbor_class_h")
        if h is None:
            raise AttributeError(name)
        return _client().op("getattr", cls, name)

    def __setattr__(cls, name, value):
        if name.startswith("_arbor") or type.__getattribute__(cls, "__dict__").get("_arbor_class_h") is None:
            return type.__setattr__(cls, name, value)
        _client().request_setattr(cls, name, value)

    def __delattr__(cls, name):
        if type.__getattribute__(cls, "__dict__").get("_arbor_class_h") is None:
            return type.__delattr__(cls, name)
        _client().op("delattr", cls, name)

    def __iter__(cls):
        return _client().op("iter", cls)

    def __len__(cls):
        return _client().op("len", cls)

    def __bool__(cls):
        # Without this, bool(cls) would fall back to __len__ above and fail
        # for every class that has no length (`if exc_type:` in traceback);
        # the subject says what its class's truth value is (True unless its
        # metaclass decides otherwise).
        if type.__getattribute__(cls, "__dict__").get("_arbor_class_h") is None:
            return True
        return bool(_client().op("bool", cls))

    def __getitem__(cls, key):
        return _client().op("getitem", cls, key)

    def __contains__(cls, item):
        return _client().op("contains", cls, item)

    def __reduce_ex__(cls, protocol):
        return object.__reduce_ex__(cls, protocol)


def _request_setattr(self, target, name, value):
    self.request({"op": "setattr", "target": self.encode(target), "name": name,
                  "args": [self.encode(value)]})


Client.request_setattr = _request_setattr

_LOCAL = frozenset({"_arbor_h", "__class__", "__weakref__", "__reduce_ex__", "__reduce__", "__get__",
                    "__getstate__", "__copy__", "__deepcopy__", "__init_subclass__"})


def _op(name):
    def f(self, *args):
        return _client().op(name, self, *args)
    f.__name__ = f"__{name}__"
    return f


def _strict_op(name, what):
    def f(self, *args):
        if _client().strict:
            _strict_refuse(self, what)
        return _client().op(name, self, *args)
    f.__name__ = f"__{name}__"
    return f


def _guard_builtin_subclass(self):
    cls = type(self)
    if CLIENT is not None and CLIENT.strict and getattr(cls, "_arbor_builtin_base", None):
        raise blame(BoundaryError(
            f"strict checks accept exact built-in types only; the code under test returned a "
            f"{cls.__qualname__}, a subclass of {cls._arbor_builtin_base}"))


class ProxyObject:
    """An object living in the subject. Attribute access, calls, operators,
    iteration and context management are executed there."""

    __slots__ = ("_arbor_h", "__weakref__")
    _arbor_remote = True

    def __getattribute__(self, name):
        if name in _LOCAL:
            if name == "__class__":
                t = type(self)
                return getattr(t, "_arbor_std", t)
            return object.__getattribute__(self, name)
        _guard_builtin_subclass(self)
        return _client().op("getattr", self, name)

    def __setattr__(self, name, value):
        _guard_builtin_subclass(self)
        _client().request_setattr(self, name, value)

    def __delattr__(self, name):
        _client().op("delattr", self, name)

    def __call__(self, /, *args, **kwargs):
        _guard_builtin_subclass(self)
        return _client().op("call", self, *args, **kwargs)

    def __repr__(self):
        try:
            return _client().op("repr", self)
        except BoundaryError as e:
            return f"<{type(self).__qualname__} of the code under test ({e})>"

    def __str__(self):
        return _client().op("str", self)

    def __format__(self, spec):
        return _client().op("format", self, spec)

    def __dir__(self):
        return _client().op("dir", self)

    def __iter__(self):
        _guard_builtin_subclass(self)
        return _client().op("iter", self)

    def __next__(self):
        return _client().op("next", self)

    def __reversed__(self):
        return _client().op("reversed", self)

    def __len__(self):
        _guard_builtin_subclass(self)
        n = _client().op("len", self)
        if type(n) is not int or n < 0:
            raise TypeError("the code under test's __len__ did not return a non-negative int")
        return n

    def __bool__(self):
        _guard_builtin_subclass(self)
        b = _client().op("bool", self)
        if type(b) is not bool:
            raise TypeError("the code under test's __bool__ did not return a bool")
        return b

    def __hash__(self):
        _guard_builtin_subclass(self)
        h = _client().op("hash", self)
        if type(h) is not int:
            raise TypeError("the code under test's __hash__ did not return an int")
        return h

    def __getitem__(self, key):
        _guard_builtin_subclass(self)
        return _client().op("getitem", self, key)

    def __setitem__(self, key, value):
        _guard_builtin_subclass(self)
        c = _client()
        c.request({"op": "setitem", "target": c.encode(self), "args": [c.encode(key), c.encode(value)]})

    def __delitem__(self, key):
        _client().op("delitem", self, key)

    def __contains__(self, item):
        _guard_builtin_subclass(self)
        b = _client().op("contains", self, item)
        return bool(b) if type(b) is bool else b

    def __enter__(self):
        return _client().op("enter", self)

    def __exit__(self, et, ev, tb):
        try:
            return _client().op("exit", self, et, None, None)
        except BoundaryError:
            raise

    def __int__(self):
        return _checked(_client().op("int", self), int, "__int__")

    def __float__(self):
        return _checked(_client().op("float", self), float, "__float__")

    def __index__(self):
        return _checked(_client().op("index", self), int, "__index__")

    def __complex__(self):
        return _checked(_client().op("complex", self), complex, "__complex__")

    def __bytes__(self):
        return _checked(_client().op("bytes", self), bytes, "__bytes__")

    def __fspath__(self):
        return _client().op("fspath", self)

    def __round__(self, *args):
        return _client().op("round", self, *args)

    def __trunc__(self):
        return _client().op("trunc", self)

    def __floor__(self):
        return _client().op("floor", self)

    def __ceil__(self):
        return _client().op("ceil", self)

    def __copy__(self):
        return _client().op("copy", self)

    def __deepcopy__(self, memo):
        return _client().op("deepcopy", self)

    def __get__(self, instance, owner=None):
        # A workspace function used as a method of a test's class (a
        # decorator applied in the test): bound in the subject, like there.
        if instance is None:
            return self
        return _client().op("get", self, instance, None)

    def __reduce_ex__(self, protocol):
        data = _client().op("pickle", self)
        if type(data) is not bytes:
            raise BoundaryError("the code under test did not pickle its object to bytes")
        return (_unpickle_remote, (data,))

    __neg__ = _op("neg")
    __pos__ = _op("pos")
    __abs__ = _op("abs")
    __invert__ = _op("invert")


def _checked(v, t, what):
    if type(v) is not t:
        raise TypeError(f"the code under test's {what} returned {type(v).__name__}, not {t.__name__}")
    return v


def _unpickle_remote(data):
    """Rebuild a pickled workspace object in the subject (the bytes are
    opaque here: this side never unpickles the subject's data)."""
    return _client().unpickle(data)


def _client_unpickle(self, data):
    reply = self.request({"op": "call", "target": {"std": ["pickle", "loads"]},
                          "args": [self.encode(data)]})
    return self.decode(reply.get("value"))


Client.unpickle = _client_unpickle

for _name, _what in (("eq", "equality"), ("ne", "inequality"), ("lt", "ordering"), ("le", "ordering"),
                     ("gt", "ordering"), ("ge", "ordering")):
    setattr(ProxyObject, f"__{_name}__", _strict_op(_name, _what))

# Protocol methods a proxy class has only when the class it stands for has
# them (so callable(), iter(), len(), `with`, isinstance(x, Iterable) and
# hasattr(type(x), "__len__") answer as for the real object).
OPTIONAL_DUNDERS = {}
for _name in ("__call__", "__iter__", "__next__", "__reversed__", "__len__", "__bool__",
              "__getitem__", "__setitem__", "__delitem__", "__contains__", "__enter__", "__exit__",
              "__int__", "__float__", "__index__", "__complex__", "__bytes__", "__fspath__",
              "__round__", "__trunc__", "__floor__", "__ceil__", "__get__", "__neg__", "__pos__",
              "__abs__", "__invert__"):
    OPTIONAL_DUNDERS[_name] = ProxyObject.__dict__[_name]
    delattr(ProxyObject, _name)
for _name in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift",
              "rshift", "and", "xor", "or", "divmod"):
    OPTIONAL_DUNDERS[f"__{_name}__"] = _op(_name)
    OPTIONAL_DUNDERS[f"__r{_name}__"] = _op("r" + _name)
    if _name != "divmod":
        OPTIONAL_DUNDERS[f"__i{_name}__"] = _op("i" + _name)


def dunders_of(cls):
    """The optional protocol methods for a proxy of `cls` (a class of this
    side: a standard-library one)."""
    return {n: f for n, f in OPTIONAL_DUNDERS.items() if getattr(cls, n, None) is not None}


class RemoteException:
    """Mixin of exception classes of the code under test: the instance is
    raised here, its other attributes live in the subject."""

    _arbor_remote = True

    def __str__(self):
        text = self.__dict__.get("_arbor_str")
        if text is not None:
            return text
        return BaseException.__str__(self)

    def __getattr__(self, name):
        if name.startswith("_arbor") or name.startswith("__"):
            raise AttributeError(name)
        h = self.__dict__.get("_arbor_h")
        if h is None:
            raise AttributeError(name)
        return _client().op("getattr", self, name)


_BUILTIN_VALUE_BASES = (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)


def _checked_bases():
    """Standard-library C types that C code checks instances of by type (not
    by duck typing) and whose instances carry no data of their own: a proxy
    class can truly derive from them (every attribute, `utcoffset` included,
    still goes to the subject), so `datetime(..., tzinfo=proxy)` accepts a
    workspace tzinfo."""
    import datetime
    return (datetime.tzinfo,)


def make_proxy_class(client, h, desc):
    """The class standing for a class of the code under test (handle `h`):
    its instances are proxies, constructing it constructs in the subject,
    `isinstance` and `except` work against it and its workspace bases."""
    name = str(desc.get("name", "Remote"))
    bases = []
    builtin_base = None
    abcs = []
    checked = []
    exc = bool(desc.get("exc"))
    for ref in desc.get("bases") or ():
        b = client.decode_type(ref)
        if getattr(b, "_arbor_remote", False) and getattr(b, "_arbor_class_h", None) is not None:
            bases.append(b)
            builtin_base = builtin_base or getattr(b, "_arbor_builtin_base", None)
        elif issubclass(b, BaseException):
            bases.append(b)
        else:
            if b in _BUILTIN_VALUE_BASES or any(issubclass(b, x) for x in _BUILTIN_VALUE_BASES):
                builtin_base = builtin_base or b.__qualname__
            if not exc and b in _checked_bases():
                checked.append(b)
            abcs.append(b)
    ns = {"__module__": str(desc.get("module", "")), "__qualname__": str(desc.get("qualname", name)),
          "_arbor_class_h": h, "_arbor_builtin_base": builtin_base, "_arbor_remote": True}
    names = desc.get("dunders")
    if type(names) is list:
        ns.update({n: OPTIONAL_DUNDERS[n] for n in names if n in OPTIONAL_DUNDERS})
    else:
        ns.update(OPTIONAL_DUNDERS)
    if exc:
        if not any(issubclass(b, BaseException) for b in bases):
            bases.append(Exception)
        if not any(getattr(b, "_arbor_remote", False) for b in bases):
            bases.insert(0, RemoteException)
    else:
        ns["__slots__"] = ()
        if not any(getattr(b, "_arbor_remote", False) for b in bases):
            bases.append(ProxyObject)
        bases.extend(checked)
    try:
        cls = ProxyMeta(name, tuple(_dedupe(bases)), ns)
    except TypeError:
        cls = ProxyMeta(name, (RemoteException, Exception) if exc else (ProxyObject,), ns)
    for b in abcs:
        register_virtual(cls, b)
    values = [b for b in abcs if b in _BUILTIN_VALUE_BASES or issubclass(b, _BUILTIN_VALUE_BASES)]
    if values and not exc:
        # isinstance(x, tuple) for a workspace subclass of tuple: `__class__`
        # names a (never instantiated) class with the same built-in base.
        try:
            type.__setattr__(cls, "_arbor_std", type(name, (values[0],), {"__module__": ns["__module__"],
                                                                        "__qualname__": ns["__qualname__"]}))
        except TypeError:
            pass
    return cls


def _dedupe(bases):
    out = []
    for b in bases:
        if b not in out and not any(issubclass(x, b) for x in out):
            out.append(b)
    return out


def register_virtual(cls, base):
    """Make `isinstance(proxy, base)` hold for a standard-library base
    class: registered with `base` where it is an ABC, else with the
    collections.abc / numbers ABCs `base` satisfies."""
    import abc
    import collections.abc as cabc
    import numbers
    targets = []
    if isinstance(base, abc.ABCMeta):
        targets.append(base)
    for a in (numbers.Number, numbers.Complex, numbers.Real, numbers.Rational, numbers.Integral,
              cabc.Iterable, cabc.Iterator, cabc.Sized, cabc.Container, cabc.Collection,
              cabc.Sequence, cabc.MutableSequence, cabc.Mapping, cabc.MutableMapping, cabc.Set,
              cabc.MutableSet, cabc.Hashable, cabc.Callable, cabc.Generator, cabc.Reversible):
        try:
            if issubclass(base, a):
                targets.append(a)
        except TypeError:
            pass
    for a in targets:
        try:
            a.register(cls)
        except TypeError:
            pass


class ProxyModule(types.ModuleType):
    """A module of the workspace, living in the subject."""

    def __init__(self, client, name, h, package):
        super().__init__(name)
        object.__setattr__(self, "_arbor_h", h)
        if package:
            object.__setattr__(self, "__path__", [])

    def __getattribute__(self, name):
        if name == "__dict__" and CLIENT is not None:
            # vars(module): the workspace module's namespace, not this
            # proxy's import bookkeeping.
            return _client().op("getattr", self, "__dict__")
        return types.ModuleType.__getattribute__(self, name)

    def __getattr__(self, name):
        if name.startswith("_arbor") or name in ("__file__", "__cached__", "__builtins__", "__wrapped__"):
            raise AttributeError(name)
        if name == "__all__":
            try:
                return _client().op("getattr", self, "__all__")
            except AttributeError:
                return [n for n in _client().op("dir", self) if not n.startswith("_")]
        return _client().op("getattr", self, name)

    def __setattr__(self, name, value):
        if name.startswith("__") and name.endswith("__"):
            return object.__setattr__(self, name, value)
        if isinstance(value, ProxyModule):
            return None  # importlib records submodules on their parent; the subject already has them
        _client().request_setattr(self, name, value)

    def __delattr__(self, name):
        _client().op("delattr", self, name)

    def __dir__(self):
        return _client().op("dir", self)

    def __reduce_ex__(self, protocol):
        return (importlib.import_module, (self.__name__,))

    def __repr__(self):
        return f"<module {self.__name__!r} of the code under test>"


class WorkspaceFinder:
    """Last on `sys.meta_path`: a module this interpreter cannot find in
    the standard library, the checks or the trusted site is imported in the
    subject and stands here as a proxy module."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in STDLIB or name.startswith(("arbor_", "_pytest", "pytest")):
            return None
        if CLIENT is None:
            return None
        msg = {"op": "import", "name": name}
        if name in CLIENT.imported:
            msg["fresh"] = True
        blocked = sorted(n for n, m in sys.modules.items() if m is None)
        if blocked:
            msg["blocked"] = blocked
        try:
            data = CLIENT.request(msg)
        except ModuleNotFoundError:
            return None
        except ImportError:
            raise
        except BoundaryError as e:
            raise ImportError(f"cannot import {name} from the code under test: {e}", name=name) from None
        module = CLIENT.decode(data.get("value"))
        if not isinstance(module, ProxyModule):
            raise ImportError(f"the code under test did not give a module for {name}", name=name)
        CLIENT.imported.add(name)
        spec = importlib.machinery.ModuleSpec(name, self, origin="arbor-subject",
                                              is_package=hasattr(module, "__path__"))
        spec._arbor_module = module
        return spec

    def create_module(self, spec):
        return spec._arbor_module

    def exec_module(self, module):
        pass


class WorkspacePathGuard:
    """A path hook that refuses every `sys.path` entry inside a workspace
    root, so a check that adds the workspace to `sys.path` still imports
    its modules through the subject."""

    def __init__(self, roots):
        self.roots = roots

    def __call__(self, entry):
        p = os.path.realpath(entry or ".")
        if any(p == r or p.startswith(r + "/") for r in self.roots):
            raise ImportError("workspace paths are imported through the subject")
        raise ImportError("not a workspace path")


# -- programs ----------------------------------------------------------------
class _LazyPipe(io.RawIOBase):
    """A Popen pipe whose content arrives when the program has run."""

    def __init__(self, popen, which):
        self._popen, self._which, self._buf = popen, which, None

    def _data(self):
        if self._buf is None:
            self._popen._run()
            self._buf = io.BytesIO(getattr(self._popen, "_" + self._which) or b"")
        return self._buf

    def readable(self):
        return True

    def readinto(self, b):
        data = self._data().read(len(b))
        b[:len(data)] = data
        return len(data)


class _LazyInput(io.RawIOBase):
    def __init__(self):
        self.data = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.data += bytes(b)
        return len(b)


class RemotePopen:
    """`subprocess.Popen` for checks: the program runs in the subject (it is
    workspace code, or acts on the workspace: git hooks and configs, shell
    scripts), and its exit status and output come back as data. Programs
    run to completion when their output is first needed."""

    def __init__(self, args, bufsize=-1, executable=None, stdin=None, stdout=None, stderr=None,
                 preexec_fn=None, close_fds=True, shell=False, cwd=None, env=None,
                 universal_newlines=None, startupinfo=None, creationflags=0,
                 restore_signals=True, start_new_session=False, pass_fds=(), *,
                 user=None, group=None, extra_groups=None, encoding=None, errors=None,
                 text=None, umask=-1, pipesize=-1, process_group=None):
        if preexec_fn is not None:
            raise BoundaryError("a check's program cannot take a preexec_fn (it runs in the subject)")
        self.args = args
        self._shell = shell
        self._cwd = os.fspath(cwd) if cwd is not None else os.getcwd()
        self._env = dict(env) if env is not None else None
        self._text = bool(text or universal_newlines or encoding or errors)
        self._encoding = encoding or "utf-8"
        self._errors = errors or "strict"
        self._want = {"stdout": stdout, "stderr": stderr}
        self.returncode = None
        self.pid = 0
        self._stdout = self._stderr = None
        self._input = _LazyInput() if stdin == subprocess.PIPE else None
        self._stdin_data = None
        if stdin not in (None, subprocess.PIPE, subprocess.DEVNULL):
            try:
                self._stdin_data = stdin.read()
            except AttributeError:
                self._stdin_data = os.read(stdin, 1 << 26) if isinstance(stdin, int) else None
            if isinstance(self._stdin_data, str):
                self._stdin_data = self._stdin_data.encode(self._encoding)
        self.stdin = self._wrap_in(self._input) if self._input is not None else None
        self.stdout = self._wrap(_LazyPipe(self, "stdout")) if stdout == subprocess.PIPE else None
        self.stderr = self._wrap(_LazyPipe(self, "stderr")) if stderr == subprocess.PIPE else None

    def _wrap(self, raw):
        buf = io.BufferedReader(raw)
        return io.TextIOWrapper(buf, encoding=self._encoding, errors=self._errors) if self._text else buf

    def _wrap_in(self, raw):
        buf = io.BufferedWriter(raw)
        return io.TextIOWrapper(buf, encoding=self._encoding, errors=self._errors, write_through=True) \
            if self._text else buf

    def _run(self, input=None, timeout=None):
        if self.returncode is not None:
            return
        if input is None and self._input is not None:
            try:
                self.stdin.flush()
            except ValueError:
                pass
            input = bytes(self._input.data)
        if input is None:
            input = self._stdin_data
        if isinstance(input, str):
            input = input.encode(self._encoding)
        args = self.args
        if isinstance(args, (str, bytes, os.PathLike)):
            args = os.fsdecode(args)
        else:
            args = [os.fsdecode(a) for a in args]
        msg = {"op": "run", "argv": args, "shell": bool(self._shell),
               "program_cwd": self._cwd, "timeout": timeout}
        if self._env is not None:
            msg["program_env"] = {os.fsdecode(k): os.fsdecode(v) for k, v in self._env.items()}
        if input is not None:
            msg["input"] = base64.b64encode(bytes(input)).decode("ascii")
        value = _client().request(msg).get("value")
        if type(value) is not dict:
            raise SubjectError("the code under test broke the protocol (a program's result)")
        if "oserror" in value:
            errno_, text, filename = value["oserror"]
            raise OSError(int(errno_), str(text), str(filename) or None)
        out = base64.b64decode(value.get("stdout") or "")
        err = base64.b64decode(value.get("stderr") or "")
        if value.get("timeout"):
            raise subprocess.TimeoutExpired(self.args, timeout, out, err)
        self._stdout, self._stderr = self._route(out, err)
        code = value.get("code")
        if type(code) is not int:
            raise SubjectError("the code under test broke the protocol (a program's exit status)")
        self.returncode = code

    def _route(self, out, err):
        want_out, want_err = self._want["stdout"], self._want["stderr"]
        if want_err == subprocess.STDOUT:
            out, err = out + err, b""
        for data, want, std in ((out, want_out, sys.stdout), (err, want_err, sys.stderr)):
            if want in (None,) and data:
                std.write(data.decode(self._encoding, "replace"))
            elif want not in (subprocess.PIPE, subprocess.DEVNULL, subprocess.STDOUT) and want is not None:
                try:
                    target = want if hasattr(want, "write") else None
                    if target is not None:
                        try:
                            target.write(data)
                        except TypeError:
                            target.write(data.decode(self._encoding, "replace"))
                    elif isinstance(want, int):
                        os.write(want, data)
                except OSError:
                    pass
        return out, err

    def communicate(self, input=None, timeout=None):
        self._run(input, timeout)
        out = self._stdout if self._want["stdout"] == subprocess.PIPE else None
        err = self._stderr if self._want["stderr"] == subprocess.PIPE else None
        if self._text:
            out = _text(out, self._encoding, self._errors)
            err = _text(err, self._encoding, self._errors)
        return out, err

    def wait(self, timeout=None):
        self._run(None, timeout)
        return self.returncode

    def poll(self):
        self._run()
        return self.returncode

    def kill(self):
        pass

    terminate = kill

    def send_signal(self, sig):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.wait()


def _text(data, encoding, errors):
    if data is None:
        return None
    return data.decode(encoding, errors).replace("\r\n", "\n").replace("\r", "\n")


def _remote_system(command):
    code = RemotePopen(command, shell=True).wait()
    return code << 8 if code >= 0 else -code


def _refuse(name):
    def f(*args, **kwargs):
        raise BoundaryError(
            f"os.{name} is not available to checks: programs run in the subject; use subprocess")
    return f


def route_programs():
    subprocess.Popen = RemotePopen
    os.system = _remote_system
    for name in ("fork", "forkpty", "execv", "execve", "execvp", "execvpe", "execl", "execle",
                 "execlp", "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl",
                 "spawnle", "spawnlp", "spawnlpe", "posix_spawn", "posix_spawnp", "popen"):
        if hasattr(os, name):
            setattr(os, name, _refuse(name))


# -- shipping this side's objects (pickles the subject rebuilds) ------------
class _Support(types.ModuleType):
    """This side's stand-in for the subject's `_arbor_subject_support`
    module: pickle names its functions, the subject runs them."""


SUPPORT = _Support("_arbor_subject_support")
for _fn in ("handle", "function", "klass", "class_state", "module", "shipped", "memory", "register_abc",
            "testcase"):
    def _stub(*a, _n=_fn):
        raise BoundaryError(f"_arbor_subject_support.{_n} runs in the subject only")
    _stub.__module__ = SUPPORT.__name__
    _stub.__qualname__ = _stub.__name__ = _fn
    setattr(SUPPORT, _fn, _stub)
sys.modules[SUPPORT.__name__] = SUPPORT

GENERATOR_LIMIT = 100_000


def _check_module(obj):
    """Whether `obj` was defined by a check module (not importable in the
    subject, so it crosses by value)."""
    m = getattr(obj, "__module__", None)
    if not isinstance(m, str):
        return False
    if m == "__main__" or m.startswith("arbor_check"):
        return True
    f = getattr(sys.modules.get(m), "__file__", None) or ""
    return any(f.startswith(root + "/") and not f.startswith(root + "/.arbor/") for root in CHECKS_ROOT)


CHECKS_ROOT = []


class MirrorRef:
    """A container a shipped function refers to (a closure cell, a global,
    a default): the subject's copy of the function gets its twin, so what
    either side appends the other sees."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj


def _mirrored(v):
    return MirrorRef(v) if type(v) in (list, dict, set, bytearray, io.BytesIO, io.StringIO) else v


class Shipper(pickle.Pickler):
    """Pickles this side's objects for the subject to rebuild and run.
    Mutable containers inside become mirrors (see `Client.mirror`): the
    subject's copy and this side's stay equal at every request boundary."""

    def __init__(self, file, client, defining=None):
        super().__init__(file, protocol=5)
        self.client = client
        self.defining = defining

    def persistent_id(self, obj):
        t = type(obj)
        if t is MirrorRef:
            return ("mirror", self.client.mirror(obj.obj))
        if t is object:
            # A sentinel (`marker = object()`): the same object when it comes back.
            return ("mirror", self.client.mirror(obj))
        if obj is self.defining or _is_test_case(obj):
            return None
        if not isinstance(obj, (type, BaseException, types.FunctionType)) \
                and not getattr(t, "_arbor_remote", False) \
                and _check_module(t) and type(getattr(obj, "__dict__", None)) is dict \
                and all(b is object or b.__module__ != "builtins" for b in t.__mro__[1:]):
            # A test double whose whole state is its __dict__: mirrored.
            return ("mirror", self.client.mirror(obj))
        return None

    def reducer_override(self, obj):
        h = remote_handle(obj)
        if h is not None:
            return (SUPPORT.handle, (h,))
        t = type(obj)
        if isinstance(obj, types.ModuleType):
            name = obj.__name__
            if name.split(".")[0] in STDLIB:
                return (SUPPORT.module, (name,))
            raise BoundaryError(f"a value passed to code under test refers to the module {name} of the checks")
        if t is types.FunctionType and (_check_module(obj) or "<locals>" in obj.__qualname__
                                        or obj.__name__ == "<lambda>"):
            return self.function(obj)
        if isinstance(obj, type) and getattr(obj, "_arbor_subclass_of", None) is not None \
                and obj is not self.defining:
            return (SUPPORT.handle, (self.client.define_class(obj),))
        if isinstance(obj, type) and _check_module(obj):
            if getattr(obj, "_arbor_subclass_of", None) is not None or obj is self.defining:
                return self.klass(obj)
            # A test double's class: defined in the subject once, by number,
            # from a definition that travels beside (not inside) this pickle,
            # so pickles may name it in any order.
            return (SUPPORT.shipped, (self.client.ship_class(obj),))
        if isinstance(obj, type) and obj.__module__ == "builtins" and getattr(builtins_module(), obj.__qualname__, None) is not obj:
            for name in dir(types):
                if getattr(types, name) is obj:
                    return (getattr, (types, name))
        if t in (property, classmethod, staticmethod):
            if t is property:
                return (property, (obj.fget, obj.fset, obj.fdel, obj.__doc__))
            return (t, (obj.__func__,))
        if t is memoryview:
            return (SUPPORT.memory, (obj.tobytes(), obj.format, obj.shape))
        if t is types.GeneratorType:
            items = []
            for x in obj:
                items.append(x)
                if len(items) > GENERATOR_LIMIT:
                    raise BoundaryError(
                        "a generator passed to code under test yields more than "
                        f"{GENERATOR_LIMIT} items; it is materialised to cross the boundary")
            return (iter, (tuple(items),))
        if t is types.MethodType and not isinstance(obj.__self__, type):
            return (getattr, (obj.__self__, obj.__func__.__name__))
        if _is_test_case(obj):
            if self.client.strict:
                raise BoundaryError(
                    "a value passed to code under test refers to the test case itself (self); "
                    "in strict checks callbacks may capture plain data, modules and functions only")
            # A callback that asserts through `self`: it runs in the subject,
            # with a stand-in test case (the test's class, its plain
            # attributes), whose failures fail the call and so the test.
            state = tuple((k, v) for k, v in obj.__dict__.items()
                          if type(v) in (str, int, float, bool, bytes, type(None), tuple))
            return (SUPPORT.testcase, (type(obj), obj._testMethodName, state))
        if type(obj).__module__.startswith(("_pytest", "pytest", "pluggy")) \
                or (isinstance(obj, type) and obj.__module__.startswith(("_pytest", "pytest", "pluggy"))):
            raise BoundaryError(
                f"pytest's own {type(obj).__qualname__} cannot be passed to code under test "
                "(pytest runs on the trusted side only)")
        return NotImplemented

    def function(self, f):
        """A function of the checks by value: its code, and what it refers
        to (closure cells, globals it names, defaults) as tuples, so that
        only the checks' own containers become mirrors."""
        code = f.__code__
        names = set()
        _names(code, names)
        g = []
        for n in sorted(names):
            if n in f.__globals__:
                v = f.__globals__[n]
                if isinstance(v, types.ModuleType) and not isinstance(v, ProxyModule) \
                        and v.__name__.split(".")[0] not in STDLIB:
                    continue
                g.append((n, _mirrored(v)))
        closure = None
        if f.__closure__ is not None:
            cells = []
            for c in f.__closure__:
                try:
                    cells.append(_mirrored(c.cell_contents))
                except ValueError:
                    raise BoundaryError(f"{f.__qualname__} captures a variable that is not yet bound")
            closure = tuple(cells)
        defaults = tuple(map(_mirrored, f.__defaults__)) if f.__defaults__ else f.__defaults__
        attrs = tuple(f.__dict__.items())
        n = self.client.shipped_fn_ids.get(id(f))
        if n is None or self.client.shipped_fns.get(n) is not f:
            n = len(self.client.shipped_fns) + 1
            self.client.shipped_fns[n] = f
            self.client.shipped_fn_ids[id(f)] = n
        return (SUPPORT.function, (marshal.dumps(code), f.__name__, f.__qualname__, f.__module__,
                                   defaults, f.__kwdefaults__, closure, tuple(g), f.__doc__, attrs, n))

    def klass(self, cls):
        """A class of the checks by value: its plain attributes go into the
        namespace it is created with (so `__init_subclass__` sees them, as
        string.Template's does), its functions and descriptors are set
        afterwards (they may refer to the class itself)."""
        meta = type(cls) if type(cls) not in (type, ProxyMeta) else None
        simple, later = [], []
        for k, v in cls.__dict__.items():
            if k in ("__dict__", "__weakref__", "__module__", "__qualname__", "__slots__", "_abc_impl") \
                    or k.startswith(("_arbor", "_unittest_", "_pytest", "pytestmark")) \
                    or type(v).__module__.startswith(("_pytest", "pytest", "pluggy")):
                continue
            plain = type(v) in (str, int, float, bool, bytes, type(None), tuple, frozenset)
            (simple if plain else later).append((k, _mirrored(v)))
        # A test double's class has a number (its instances come back as
        # data); a subclass of a workspace class is a proxy class instead
        # (its instances stay in the subject).
        n = self.client.shipped.get(id(cls))
        abcs = registered_abcs(cls)
        if abcs:
            later.append(("_arbor_abcs", abcs))
        return (SUPPORT.klass, (cls.__name__, cls.__bases__, cls.__qualname__, cls.__module__, meta,
                                tuple(simple), n),
                tuple(later), None, None, SUPPORT.class_state)


def _is_test_case(obj):
    unittest = sys.modules.get("unittest")
    return unittest is not None and isinstance(obj, unittest.TestCase)


def _named(cls):
    """Whether `cls` is reachable by its module and qualified name
    (`NoneType` is not: it lives in `types`)."""
    obj = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is cls


def registered_abcs(cls):
    """The standard-library ABCs `cls` was registered with (numbers.Rational
    .register(C) in a test): the subject's copy is registered likewise."""
    import abc
    out = []
    for module in ("numbers", "collections.abc"):
        mod = sys.modules.get(module)
        if mod is None:
            continue
        for name in dir(mod):
            a = getattr(mod, name)
            if isinstance(a, abc.ABCMeta) and not name.startswith("_"):
                registry = abc._get_dump(a)[0]
                if any(r() is cls for r in registry):
                    out.append((module, name))
    return tuple(out)


def builtins_module():
    import builtins
    return builtins


def _names(code, out):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _names(c, out)


def ship(client, obj, define=False):
    buf = io.BytesIO()
    try:
        Shipper(buf, client, obj if define else None).dump(obj)
    except BoundaryError:
        raise
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as e:
        raise BoundaryError(
            f"a {type(obj).__qualname__} cannot be passed to code under test across the "
            f"verifier's boundary ({e})") from None
    return buf.getvalue()


# -- set-up ------------------------------------------------------------------
def subject_program(arbor_dir):
    """The subject's program as the bootstrap reads it: `M` and the
    marshalled code when `.arbor/subject.marshal` was made by this very
    interpreter version, else `S` and the source."""
    import importlib.util
    try:
        with open(os.path.join(arbor_dir, "subject.marshal"), "rb") as f:
            data = f.read()
        magic, _, code = data.partition(b"\n")
        if magic == b"ARBOR " + importlib.util.MAGIC_NUMBER.hex().encode():
            return b"M" + code
    except OSError:
        pass
    with open(os.path.join(arbor_dir, "subject.py"), "rb") as f:
        return b"S" + f.read()


# -- doctests of the code under test (run in the subject) --------------------
def bridge_doctest():
    """Doctests found in the code under test's docstrings are workspace text
    (examples and expected output alike): they run in the subject, where the
    code lives, and only their counts and report cross. This side's own
    doctests (those of the check modules) run here as usual."""
    import doctest

    class RemoteDocTest(doctest.DocTest):
        pass

    find, run = doctest.DocTestFinder.find, doctest.DocTestRunner.run

    def remote_find(self, obj, name=None, module=None, globs=None, extraglobs=None):
        if remote_handle(obj) is None:
            return find(self, obj, name, module, globs, extraglobs)
        found = _client().op("doctest_find", obj, name, bool(self._recurse), bool(self._exclude_empty))
        tests = []
        for test_name, filename, lineno, count, docstring in found:
            examples = [doctest.Example("pass\n", "") for _ in range(int(count))]
            t = RemoteDocTest(examples, {}, str(test_name), str(filename), lineno, docstring)
            t._arbor_target = obj
            t._arbor_name = name
            tests.append(t)
        return tests

    def remote_run(self, test, compileflags=None, out=None, clear_globs=True):
        if not isinstance(test, RemoteDocTest):
            return run(self, test, compileflags, out, clear_globs)
        failed, tried, report = _client().op("doctest_run", test._arbor_target, test._arbor_name,
                                             test.name, int(self.optionflags))
        (out or sys.stdout.write)(str(report))
        self.failures += int(failed)
        self.tries += int(tried)
        return doctest.TestResults(int(failed), int(tried))

    doctest.DocTestFinder.find = remote_find
    doctest.DocTestRunner.run = remote_run


def connect(subject_program, roots, deadline, strict, cwd="/workspace"):
    """Open the channel at fd 3: send the subject its program, then its
    set-up, and install the import and program routing here."""
    global CLIENT
    channel = Channel(3, deadline)
    body = subject_program
    try:
        os.write(3, len(body).to_bytes(4, "big"))
        view = memoryview(body)
        while view:
            view = view[os.write(3, view):]
    except OSError as e:
        raise SubjectError(f"the subject process is not there ({e})") from None
    CLIENT = Client(channel, strict)
    CLIENT.request({"op": "hello", "roots": list(roots), "cwd": cwd})
    sys.meta_path.append(WorkspaceFinder())
    sys.path_hooks.insert(0, WorkspacePathGuard([os.path.realpath(r) for r in roots]))
    sys.path_importer_cache.clear()
    route_programs()
    return CLIENT
