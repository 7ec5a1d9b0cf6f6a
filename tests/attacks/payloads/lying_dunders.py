# Results whose __eq__, __hash__, __bool__ and __len__ lie: equal to
# anything, hashing like the expected value, always true, as long as wanted.
class _Liar:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __hash__(self):
        return hash(9)
    def __bool__(self):
        return True
    def __len__(self):
        return 6


class _LiarList(list):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = None
    def __len__(self):
        return 6


def _arbor_wrap(value):
    return _Liar()


def _arbor_wrap_cells(value):
    return _LiarList(value)


def _attack():
    pass
