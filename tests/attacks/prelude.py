# --- the attack catalogue's prelude (tests/attacks/prelude.py) ---
# Helpers shared by the payloads: the ids of the checks being run (found by
# walking the garbage collector, as an attacker would) and a forged result
# line claiming that every one of them passed.
import os as _os
import sys as _sys


def _check_ids():
    import gc
    ids = set()
    for o in gc.get_objects():
        try:
            if hasattr(o, "_testMethodName") and callable(getattr(o, "id", None)):
                ids.add(o.id())
            elif type(o).__name__ in ("Function", "TestCaseFunction") and isinstance(
                getattr(o, "nodeid", None), str
            ):
                ids.add(o.nodeid)
        except Exception:
            pass
    return sorted(ids)


def _forged(nonce):
    tests = ", ".join(
        '{"id": "%s", "outcome": "pass", "detail": ""}' % i for i in _check_ids() or ["all"]
    )
    return 'ARBOR-RESULT %s {"tests": [%s]}\n' % (nonce, tests)


_done = []


def _once(f):
    def run():
        if not _done:
            _done.append(1)
            f()
    return run


# What the checked functions return: the value itself, unless a payload
# below replaces these.
def _arbor_wrap(value):
    return value


def _arbor_wrap_cells(value):
    return value
