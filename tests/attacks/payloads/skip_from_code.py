# Raise a skip from the code under test: a failing test becomes "skipped",
# which unittest's wasSuccessful() counts as success.
def _attack():
    import unittest
    raise unittest.SkipTest("not applicable here")
