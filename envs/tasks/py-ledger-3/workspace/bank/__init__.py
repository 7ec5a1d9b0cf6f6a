from .errors import (AccountFrozen, AlreadyReversed, InsufficientFunds, LedgerError,
                     UnknownAccount, UnknownTransaction)
from .ledger import Ledger

__all__ = ["Ledger", "AccountFrozen", "AlreadyReversed", "InsufficientFunds", "LedgerError",
           "UnknownAccount", "UnknownTransaction"]
