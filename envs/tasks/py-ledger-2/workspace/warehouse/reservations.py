"""Book-keeping of open reservations."""
from dataclasses import dataclass

from .errors import UnknownReservation


@dataclass(frozen=True)
class Reservation:
    rid: int
    sku: str
    qty: int


class ReservationBook:
    """Active reservations by id.  Ids start at 1 and are never reused."""

    def __init__(self):
        self._active = {}
        self._next_id = 1

    def open(self, sku, qty):
        res = Reservation(self._next_id, sku, qty)
        self._active[res.rid] = res
        self._next_id += 1
        return res

    def get(self, rid):
        try:
            return self._active[rid]
        except KeyError:
            raise UnknownReservation(rid) from None

    def close(self, rid):
        """Remove the active reservation ``rid`` and return it.

        Raises UnknownReservation when ``rid`` is not an active reservation
        (never opened, or already closed).
        """
        raise NotImplementedError("ReservationBook.close")

    def reserved(self, sku):
        """Units of ``sku`` held by active reservations."""
        return sum(r.qty for r in self._active.values() if r.sku == sku)

    def active_ids(self):
        return sorted(self._active)
