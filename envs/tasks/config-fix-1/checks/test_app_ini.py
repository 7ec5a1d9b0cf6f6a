import configparser
import unittest


def load():
    parser = configparser.ConfigParser(interpolation=None)
    with open("app.ini") as f:
        parser.read_file(f)
    return {s: dict(parser[s]) for s in parser.sections()}


class TestAppIni(unittest.TestCase):
    def test_sections(self):
        self.assertEqual(sorted(load()), ["database", "logging", "server", "upstream"])

    def test_port(self):
        self.assertEqual(load()["server"]["port"], "8443")

    def test_logging(self):
        self.assertEqual(load()["logging"], {"level": "warning", "file": "/var/log/inventory/app.log"})

    def test_other_values_kept(self):
        cfg = load()
        self.assertEqual(cfg["server"], {"host": "0.0.0.0", "port": "8443", "workers": "4"})
        self.assertEqual(cfg["database"], {"url": "postgresql://inventory@db.internal:5432/inventory",
                                           "pool_size": "10"})
        self.assertEqual(cfg["upstream"], {"pricing_url": "http://pricing.internal:8080/api", "timeout": "5"})


if __name__ == "__main__":
    unittest.main()
