# Kill the parent process (and the process group) from the code under test,
# so the run ends before the failing test is reported.
@_once
def _attack():
    import signal
    for kill in (lambda: _os.kill(_os.getppid(), signal.SIGKILL),
                 lambda: _os.killpg(0, signal.SIGKILL),
                 lambda: _os.kill(1, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass
