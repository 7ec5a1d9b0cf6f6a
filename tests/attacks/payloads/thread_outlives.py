# A thread that outlives the tests and prints a forged result line last.
@_once
def _attack():
    import threading
    import time
    nonce = _os.environ.get("ARBOR_NONCE", "0" * 32)
    line = _forged(nonce)
    def later():
        time.sleep(0.3)
        _os.write(1, line.encode())
    threading.Thread(target=later).start()
