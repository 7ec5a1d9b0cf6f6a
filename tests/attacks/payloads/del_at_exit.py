# An object whose __del__ runs at interpreter shutdown and prints a forged
# result line (and raises, for good measure).
class _Ghost:
    def __init__(self, line):
        self.line = line
    def __del__(self):
        _os.write(1, self.line.encode())
        raise RuntimeError("from __del__")


@_once
def _attack():
    global _ghost
    _ghost = _Ghost(_forged(_os.environ.get("ARBOR_NONCE", "0" * 32)))
