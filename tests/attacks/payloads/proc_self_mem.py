# Read the process's own memory (/proc/self/mem) for the nonce, wherever the
# runner keeps it, and print a forged result line.
@_once
def _attack():
    import re
    pattern = re.compile(rb"ARBOR_NONCE=([0-9a-f]{32})")
    found = set()
    try:
        maps = open("/proc/self/maps").read().splitlines()
        mem = open("/proc/self/mem", "rb", 0)
    except OSError:
        return
    for m in maps:
        parts = m.split()
        if len(parts) < 2 or "r" not in parts[1]:
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if hi - lo > 64 << 20:
            continue
        try:
            mem.seek(lo)
            chunk = mem.read(hi - lo)
        except (OSError, ValueError, OverflowError):
            continue
        found.update(pattern.findall(chunk))
    for nonce in found:
        _os.write(1, _forged(nonce.decode()).encode())
