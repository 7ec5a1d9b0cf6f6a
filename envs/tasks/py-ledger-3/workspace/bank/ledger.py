"""The ledger: accounts plus an append-only list of entries."""
from collections import namedtuple

from . import money
from .account import Account
from .errors import AlreadyReversed, LedgerError, UnknownAccount, UnknownTransaction

Entry = namedtuple("Entry", "txn account delta memo")


class Ledger:
    def __init__(self):
        self._accounts = {}
        self._entries = []
        self._next_txn = 1
        self._reversed = set()

    # -- accounts -----------------------------------------------------------
    def open(self, account_id, overdraft="0"):
        if account_id in self._accounts:
            raise LedgerError(f"account exists: {account_id}")
        self._accounts[account_id] = Account(account_id, overdraft=money.to_cents(overdraft))

    def freeze(self, account_id, frozen=True):
        self._account(account_id).frozen = frozen

    def balance(self, account_id):
        return money.fmt(self._account(account_id).balance)

    def history(self, account_id):
        """[(txn, "+12.00" / "-3.50", memo), ...] for one account, oldest first."""
        self._account(account_id)
        return [
            (e.txn, ("+" if e.delta > 0 else "") + money.fmt(e.delta), e.memo)
            for e in self._entries
            if e.account == account_id
        ]

    def _account(self, account_id):
        try:
            return self._accounts[account_id]
        except KeyError:
            raise UnknownAccount(account_id) from None

    # -- posting --------------------------------------------------------------
    def _post(self, lines, check_funds=True):
        """Post [(account_id, delta_cents, memo), ...] atomically as one transaction."""
        for account_id, delta, _memo in lines:
            self._account(account_id).check(delta, check_funds)
        txn = self._next_txn
        self._next_txn += 1
        for account_id, delta, memo in lines:
            self._account(account_id).balance += delta
            self._entries.append(Entry(txn, account_id, delta, memo))
        return txn

    def _positive(self, amount):
        cents = money.to_cents(amount)
        if cents <= 0:
            raise ValueError(f"amount must be positive: {amount!r}")
        return cents

    def deposit(self, account_id, amount, memo="deposit"):
        return self._post([(account_id, self._positive(amount), memo)])

    def withdraw(self, account_id, amount, memo="withdrawal"):
        return self._post([(account_id, -self._positive(amount), memo)])

    def transfer(self, src, dst, amount, memo="transfer"):
        if src == dst:
            raise LedgerError("transfer to the same account")
        cents = self._positive(amount)
        return self._post([(src, -cents, memo), (dst, cents, memo)])

    def reverse(self, txn_id):
        """Undo transaction ``txn_id``; returns the id of the new transaction.

        The new transaction posts the opposite of EVERY entry of ``txn_id``
        (a transfer has two), each with memo "reversal of <txn_id>".  Overdraft
        limits are not checked for reversals.  Raises UnknownTransaction if
        ``txn_id`` does not exist and AlreadyReversed if it was reversed before.
        """
        for e in self._entries:
            if e.txn == txn_id:
                return self._post([(e.account, -e.delta, f"reversal of {txn_id}")], check_funds=False)
        raise UnknownTransaction(txn_id)
