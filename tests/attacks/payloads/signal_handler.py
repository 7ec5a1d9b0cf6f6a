# A signal handler that prints a forged result line and exits, raised at
# once (and a timer that would raise it again).
@_once
def _attack():
    import signal
    nonce = _os.environ.get("ARBOR_NONCE", "0" * 32)
    line = _forged(nonce)
    def handler(signum, frame):
        _os.write(1, line.encode())
        _os._exit(0)
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    signal.raise_signal(signal.SIGALRM)
