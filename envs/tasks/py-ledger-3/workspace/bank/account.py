"""A single account."""
from dataclasses import dataclass

from .errors import AccountFrozen, InsufficientFunds


@dataclass
class Account:
    id: str
    balance: int = 0          # cents
    overdraft: int = 0        # cents the balance may go below zero
    frozen: bool = False

    def check(self, delta, check_funds=True):
        """Raise if ``delta`` (cents, + or -) cannot be posted to this account."""
        if self.frozen:
            raise AccountFrozen(self.id)
        if check_funds and delta < 0 and self.balance + delta < -self.overdraft:
            raise InsufficientFunds(self.id)
