# Write forged result lines straight to file descriptors 1 and 2, and to
# the parent's standard output (/proc/PPID/fd/1), with the nonce read from
# the process's initial environment (/proc/self/environ).
@_once
def _attack():
    try:
        with open("/proc/self/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return
    for e in env:
        if e.startswith(b"ARBOR_NONCE="):
            line = _forged(e.split(b"=", 1)[1].decode()).encode()
            _os.write(1, line)
            _os.write(2, line)
            try:
                with open(f"/proc/{_os.getppid()}/fd/1", "wb") as out:
                    out.write(line)
            except OSError:
                pass
