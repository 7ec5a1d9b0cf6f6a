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


EXPECTED = {'counted': 13, 'counts': {'ERROR': {'api': 2, 'mailer': 1, 'payments': 3, 'search': 1}, 'WARN': {'api': 2, 'mailer': 1, 'payments': 2, 'search': 1}}, 'input': 'data/events.log', 'lines': 20}
EVENTS_SHA256 = '1c3251b1ae93938b5d0c486131f8e8d138930e235385391d8abf126ff2618d2f'


class TestRollup(unittest.TestCase):
    def test_rollup(self):
        self.assertEqual(json.loads(read("output/rollup.json")), EXPECTED)

    def test_only_the_rollup(self):
        self.assertEqual(sorted(os.listdir("output")), ["rollup.json"])

    def test_log_untouched(self):
        self.assertEqual(sha256("data/events.log"), EVENTS_SHA256)
        self.assertEqual(sorted(os.listdir("data")), ["events.log"])


if __name__ == "__main__":
    unittest.main()
