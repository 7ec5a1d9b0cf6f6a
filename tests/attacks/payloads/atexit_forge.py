# An exit handler that prints a forged result line after the tests.
@_once
def _attack():
    import atexit
    nonce = _os.environ.get("ARBOR_NONCE", "0" * 32)
    line = []
    atexit.register(lambda: _os.write(1, (line[0] if line else _forged(nonce)).encode()))
    line.append(_forged(nonce))
