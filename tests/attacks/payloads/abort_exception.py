# Raise an exception the runner does not catch (KeyboardInterrupt), from the
# code under test and from the __del__ of an object the test drops: the run
# ends before the failing test is reported.
def _attack():
    raise KeyboardInterrupt
