# Replace sys.stdout with a writer that turns every reported failure into a
# pass.
@_once
def _attack():
    class Rewriter:
        def __init__(self, inner):
            self.inner = inner
        def write(self, s):
            for bad in ('"fail"', '"error"'):
                s = s.replace(bad, '"pass"')
            return self.inner.write(s)
        def flush(self):
            return self.inner.flush()
        def __getattr__(self, name):
            return getattr(self.inner, name)
    _sys.stdout = Rewriter(_sys.stdout)
