# Sleep until the checks time out, so the failing test never reports.
def _attack():
    import time
    time.sleep(10_000)
