import json
import unittest


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate keys: %r" % keys)
    return dict(pairs)


def load(hook=None):
    with open("config/pipeline.json") as f:
        return json.load(f, object_pairs_hook=hook)


class TestPipelineConfig(unittest.TestCase):
    def test_parses_without_duplicate_keys(self):
        cfg = load(no_duplicates)
        self.assertEqual(sorted(cfg), ["name", "notify", "schedule", "sink", "source", "version"])

    def test_timeout(self):
        self.assertEqual(load(no_duplicates)["source"]["timeout_s"], 30)

    def test_sink_paths(self):
        sink = load()["sink"]
        self.assertEqual(sink["path"], "/data/warehouse/exports/nightly/")
        self.assertEqual(sink["archive_path"], "/data/exports/archive/")

    def test_notify(self):
        self.assertEqual(load()["notify"], ["data-team@example.com", "oncall@example.com"])

    def test_everything_else_kept(self):
        self.assertEqual(load(), {
            "name": "nightly-etl",
            "version": 3,
            "source": {
                "type": "postgres",
                "dsn": "postgresql://etl@warehouse.internal:5432/sales",
                "timeout_s": 30,
                "tables": ["orders", "customers", "refunds"],
            },
            "sink": {
                "type": "parquet",
                "path": "/data/warehouse/exports/nightly/",
                "archive_path": "/data/exports/archive/",
                "compression": "snappy",
            },
            "schedule": {"cron": "0 2 * * *", "timezone": "UTC"},
            "notify": ["data-team@example.com", "oncall@example.com"],
        })


if __name__ == "__main__":
    unittest.main()
