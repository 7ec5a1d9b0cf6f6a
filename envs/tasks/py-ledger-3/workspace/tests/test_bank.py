import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bank import AccountFrozen, InsufficientFunds, Ledger


class TestLedger(unittest.TestCase):
    def setUp(self):
        self.ledger = Ledger()
        self.ledger.open("alice")
        self.ledger.open("bob", overdraft="50")
        self.ledger.deposit("alice", "100")

    def test_deposit_and_withdraw(self):
        self.ledger.withdraw("alice", "30.5")
        self.assertEqual(self.ledger.balance("alice"), "69.50")

    def test_overdraft(self):
        self.ledger.withdraw("bob", "50.00")
        self.assertEqual(self.ledger.balance("bob"), "-50.00")
        with self.assertRaises(InsufficientFunds):
            self.ledger.withdraw("bob", "0.01")

    def test_transfer_to_frozen(self):
        self.ledger.freeze("bob")
        with self.assertRaises(AccountFrozen):
            self.ledger.transfer("alice", "bob", "10")
        self.assertEqual(self.ledger.balance("alice"), "100.00")

    def test_reverse_deposit(self):
        txn = self.ledger.deposit("bob", "20")
        self.ledger.reverse(txn)
        self.assertEqual(self.ledger.balance("bob"), "0.00")

    def test_reverse_transfer(self):
        txn = self.ledger.transfer("alice", "bob", "40")
        self.ledger.reverse(txn)
        self.assertEqual(self.ledger.balance("alice"), "100.00")
        self.assertEqual(self.ledger.balance("bob"), "0.00")


if __name__ == "__main__":
    unittest.main()
