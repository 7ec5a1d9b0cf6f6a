"""Probe the kernel interfaces an Arbor action should (not) reach.

Prints one JSON object: for each probe, 0 when the call succeeded, else the
errno's name. Run inside a sandbox by tests/tests/confinement.rs, with the
confinement on and (as the positive control) off.
"""

import ctypes
import errno
import json
import os
import threading

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

X86_64 = os.uname().machine == "x86_64"
NR = {
    # x86-64 numbers; aarch64 where they differ.
    "unshare": 272 if X86_64 else 97,
    "setns": 308 if X86_64 else 268,
    "keyctl": 250 if X86_64 else 219,
    "io_uring_setup": 425,
    "userfaultfd": 323 if X86_64 else 282,
    "personality": 135 if X86_64 else 92,
    "clone3": 435,
    "pidfd_open": 434,
    "perf_event_open": 298 if X86_64 else 241,
    "name_to_handle_at": 303 if X86_64 else 264,
    "bpf": 321 if X86_64 else 280,
    "getpid": 39 if X86_64 else 172,
    "mount": 165 if X86_64 else 40,
}


def call(name, *args, nr=None):
    nr = NR[name] if nr is None else nr
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r < 0:
        return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    return 0


def buf(n):
    return ctypes.addressof(ctypes.create_string_buffer(n))


out = {}
out["getpid"] = call("getpid")
out["unshare_none"] = call("unshare", 0)
out["unshare_user"] = call("unshare", 0x10000000)  # CLONE_NEWUSER
out["unshare_net"] = call("unshare", 0x40000000)  # CLONE_NEWNET
out["setns"] = call("setns", -1, 0)
# KEYCTL_GET_KEYRING_ID (0) of KEY_SPEC_SESSION_KEYRING (-3), create (1).
out["keyctl"] = call("keyctl", 0, -3, 1)
params = ctypes.create_string_buffer(120)
out["io_uring_setup"] = call("io_uring_setup", 1, ctypes.addressof(params))
out["userfaultfd"] = call("userfaultfd", 1)  # UFFD_USER_MODE_ONLY
out["personality_query"] = call("personality", 0xFFFFFFFF)
out["personality_no_aslr"] = call("personality", 0x0040000)  # ADDR_NO_RANDOMIZE
out["clone3"] = call("clone3", 0, 0)
out["pidfd_open_init"] = call("pidfd_open", 1, 0)
out["pidfd_open_self"] = call("pidfd_open", os.getpid(), 0)
attr = ctypes.create_string_buffer(128)
out["perf_event_open"] = call("perf_event_open", ctypes.addressof(attr), 0, -1, -1, 0)
handle = ctypes.create_string_buffer(136)
ctypes.memmove(handle, (128).to_bytes(4, "little"), 4)
mount_id = ctypes.c_int(0)
out["name_to_handle_at"] = call(
    "name_to_handle_at", -100, ctypes.addressof(ctypes.create_string_buffer(b"/workspace")),
    ctypes.addressof(handle), ctypes.addressof(mount_id), 0,
)
out["bpf"] = call("bpf", 0, 0, 0)
out["mount"] = call("mount", 0, ctypes.addressof(ctypes.create_string_buffer(b"/tmp")), 0, 0x1000, 0)
if X86_64:
    out["x32_getpid"] = call("getpid", nr=0x40000000 | 39)
ran = []
t = threading.Thread(target=lambda: ran.append(1))
t.start()
t.join()
out["thread"] = 0 if ran else "ENOTHREAD"
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = 0 if os.waitpid(pid, 0)[1] >> 8 == 7 else "ECHILD"
with open("/proc/self/status") as f:
    status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
out["Seccomp"] = status.get("Seccomp", "?").strip()
out["NoNewPrivs"] = status.get("NoNewPrivs", "?").strip()
print(json.dumps(out, sort_keys=True))
