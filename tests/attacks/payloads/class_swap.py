# __class__ swapping: results whose __class__ claims a built-in type (so
# isinstance() checks pass) and whose class is swapped to one that compares
# equal to anything.
class _Shape:
    pass


class _Liar(_Shape):
    __class__ = property(lambda self: int)
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __hash__(self):
        return hash(9)
    def __len__(self):
        return 6


def _arbor_wrap(value):
    o = _Shape()
    o.__class__ = _Liar
    return o


_arbor_wrap_cells = _arbor_wrap


def _attack():
    pass
