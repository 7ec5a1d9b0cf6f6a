import os
import unittest


def read(path):
    with open(path) as f:
        return f.read()


class TestErrorReport(unittest.TestCase):
    def test_by_service(self):
        self.assertEqual(read("reports/errors_by_service.txt"),
                         "auth 5\nbilling 2\nmailer 4\nsearch 3\n")

    def test_total(self):
        self.assertEqual(read("reports/error_total.txt").strip(), "14")
        self.assertEqual(len(read("reports/error_total.txt").splitlines()), 1)

    def test_only_two_reports(self):
        self.assertEqual(sorted(os.listdir("reports")), ["error_total.txt", "errors_by_service.txt"])

    def test_log_untouched(self):
        lines = read("logs/app.log").splitlines()
        self.assertEqual(len(lines), 50)
        self.assertEqual(sum(1 for l in lines if l.split()[1] == "ERROR"), 14)


if __name__ == "__main__":
    unittest.main()
