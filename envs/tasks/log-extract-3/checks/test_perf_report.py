import gzip
import unittest


def read(path):
    with open(path) as f:
        return f.read()


class TestPerfReport(unittest.TestCase):
    def test_slowest(self):
        self.assertEqual(read("reports/slowest.txt").splitlines(), [
            "3120 GET /v1/reports/monthly",
            "2210 GET /v1/reports/monthly",
            "1740 POST /v1/orders",
            "1015 GET /v1/search",
            "980 GET /v1/search",
        ])

    def test_summary(self):
        self.assertEqual(read("reports/summary.txt"), "requests=66\nerrors=11\nmax_ms=3120\n")

    def test_rotated_logs_kept(self):
        with gzip.open("logs/api.log.2.gz", "rt") as f:
            self.assertEqual(len(f.read().splitlines()), 22)
        self.assertEqual(len(read("logs/api.log.1").splitlines()), 25)
        self.assertEqual(len(read("logs/api.log").splitlines()), 21)


if __name__ == "__main__":
    unittest.main()
