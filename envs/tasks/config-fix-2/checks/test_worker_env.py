import re
import subprocess
import unittest

EXPECTED = {
    "APP_NAME": "report-worker",
    "DATA_DIR": "/srv/reports/data",
    "QUEUE_URL": "amqp://worker@mq.internal:5672/reports",
    "LOG_LEVEL": "info",
    "GREETING": '"Monthly report ready"',
    "MAX_JOBS": "8",
    "OUTPUT_DIR": "/srv/reports/output",
    "WORKER_TIMEOUT": "300",
}


def entries():
    out = []
    with open("deploy/worker.env") as f:
        for line in f.read().splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            out.append(line)
    return out


class TestWorkerEnv(unittest.TestCase):
    def test_lines_are_valid(self):
        bad = [l for l in entries() if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S.*", l)]
        self.assertEqual(bad, [])

    def test_each_key_once(self):
        keys = [l.split("=", 1)[0] for l in entries()]
        self.assertEqual(sorted(keys), sorted(EXPECTED))

    def test_values(self):
        values = dict(l.split("=", 1) for l in entries())
        self.assertEqual(values, EXPECTED)

    def test_sourced_by_bash(self):
        r = subprocess.run(
            ["bash", "-c", 'set -a; . deploy/worker.env; printf "%s|" "$DATA_DIR" "$OUTPUT_DIR" "$WORKER_TIMEOUT" "$GREETING" "$MAX_JOBS"'],
            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
        self.assertEqual(r.stderr, "")
        self.assertEqual(r.stdout, "/srv/reports/data|/srv/reports/output|300|Monthly report ready|8|")


if __name__ == "__main__":
    unittest.main()
