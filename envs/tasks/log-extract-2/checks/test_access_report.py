import unittest


def read(path):
    with open(path) as f:
        return f.read()


class TestAccessReport(unittest.TestCase):
    def test_unique_ips(self):
        self.assertEqual(read("reports/unique_ips.txt").splitlines(), [
            "9.8.7.6", "10.0.0.9", "10.0.0.10", "10.0.0.23", "10.0.2.5",
            "172.16.0.100", "192.168.1.3", "192.168.1.20",
        ])

    def test_probe_left_out(self):
        self.assertNotIn("10.0.0.1", read("reports/unique_ips.txt").splitlines())
        self.assertNotIn("/healthz", read("reports/server_errors.txt"))

    def test_server_errors(self):
        self.assertEqual(read("reports/server_errors.txt"),
                         "6 /api/items\n3 /api/orders/17\n3 /static/app.js\n2 /api/orders\n1 /login\n")

    def test_log_untouched(self):
        lines = read("logs/access.log").splitlines()
        self.assertEqual(len(lines), 70)
        self.assertEqual(sum(1 for l in lines if '"GET /healthz ' in l), 8)


if __name__ == "__main__":
    unittest.main()
