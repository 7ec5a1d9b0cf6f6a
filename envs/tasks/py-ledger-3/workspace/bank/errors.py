"""Ledger errors."""


class LedgerError(Exception):
    pass


class UnknownAccount(LedgerError, KeyError):
    pass


class UnknownTransaction(LedgerError, KeyError):
    pass


class AlreadyReversed(LedgerError):
    pass


class AccountFrozen(LedgerError):
    pass


class InsufficientFunds(LedgerError):
    pass
