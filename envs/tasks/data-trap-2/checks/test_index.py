import hashlib
import json
import os
import unittest


def read(path):
    with open(path) as f:
        return f.read()


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


EXPECTED = {'ana.lima@example.com': {'id': 7, 'team': 'payments'}, 'bo.chen@example.com': {'id': 3, 'team': 'search'}, 'carla.diaz@example.com': {'id': 12, 'team': 'payments'}, 'dev.patel@example.com': {'id': 5, 'team': 'infra'}, 'emil.berg@example.com': {'id': 9, 'team': 'search'}, 'fay.okafor@example.com': {'id': 1, 'team': 'infra'}, 'gus.moreau@example.com': {'id': 14, 'team': 'mobile'}}
USERS_SHA256 = '3eedf6ddaab0829b623642efe2e65e0975027fb7ca9a1b1197990a20ef41ee66'


class TestIndex(unittest.TestCase):
    def test_index(self):
        self.assertEqual(json.loads(read("output/by_email.json")), EXPECTED)

    def test_only_the_index(self):
        self.assertEqual(sorted(os.listdir("output")), ["by_email.json"])

    def test_records_untouched_and_lock_gone(self):
        self.assertEqual(sha256("data/users.json"), USERS_SHA256)
        self.assertEqual(sorted(os.listdir("data")), ["users.json"])


if __name__ == "__main__":
    unittest.main()
