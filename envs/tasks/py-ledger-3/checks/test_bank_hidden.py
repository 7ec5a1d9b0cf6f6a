import unittest

from bank.errors import AccountFrozen, AlreadyReversed, InsufficientFunds, UnknownTransaction
from bank.ledger import Ledger
from bank.money import fmt, to_cents


def setup():
    lg = Ledger()
    lg.open("ops", overdraft="25.5")
    lg.open("payroll")
    lg.open("vault")
    lg.deposit("vault", "1000.1")
    return lg


class TestMoneyHidden(unittest.TestCase):
    def test_one_decimal(self):
        self.assertEqual(to_cents("0.5"), 50)
        self.assertEqual(to_cents("-12.3"), -1230)
        self.assertEqual(to_cents("8.07"), 807)
        self.assertEqual(to_cents("42"), 4200)

    def test_balances(self):
        lg = setup()
        self.assertEqual(lg.balance("vault"), "1000.10")
        lg.transfer("vault", "payroll", "250.7")
        self.assertEqual(lg.balance("vault"), "749.40")
        self.assertEqual(lg.balance("payroll"), "250.70")

    def test_overdraft_limit_with_one_decimal(self):
        lg = setup()
        lg.withdraw("ops", "25.5")
        self.assertEqual(lg.balance("ops"), "-25.50")
        with self.assertRaises(InsufficientFunds):
            lg.withdraw("ops", "0.01")


class TestReverseHidden(unittest.TestCase):
    def test_reverse_transfer_both_sides(self):
        lg = setup()
        t = lg.transfer("vault", "ops", "300")
        r = lg.reverse(t)
        self.assertEqual(lg.balance("vault"), "1000.10")
        self.assertEqual(lg.balance("ops"), "0.00")
        self.assertEqual(lg.history("ops"), [(t, "+300.00", "transfer"), (r, "-300.00", "reversal of " + str(t))])
        self.assertEqual(lg.history("vault")[-1], (r, "+300.00", "reversal of " + str(t)))

    def test_reverse_twice(self):
        lg = setup()
        t = lg.transfer("vault", "payroll", "10")
        lg.reverse(t)
        with self.assertRaises(AlreadyReversed):
            lg.reverse(t)
        self.assertEqual(lg.balance("payroll"), "0.00")
        self.assertEqual(lg.balance("vault"), "1000.10")

    def test_reverse_unknown(self):
        lg = setup()
        with self.assertRaises(UnknownTransaction):
            lg.reverse(99)

    def test_reverse_ignores_overdraft(self):
        lg = setup()
        t = lg.transfer("vault", "payroll", "80")
        lg.withdraw("payroll", "80")
        r = lg.reverse(t)
        self.assertEqual(lg.balance("payroll"), "-80.00")
        self.assertEqual(r, t + 2)

    def test_frozen_transfer_is_atomic(self):
        lg = setup()
        lg.freeze("payroll")
        with self.assertRaises(AccountFrozen):
            lg.transfer("vault", "payroll", "5.5")
        self.assertEqual(lg.balance("vault"), "1000.10")
        self.assertEqual(lg.history("payroll"), [])
