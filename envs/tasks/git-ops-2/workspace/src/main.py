import configparser


def load(path="src/app.cfg"):
    cfg = configparser.ConfigParser()
    cfg.read(path)
    return cfg["app"]


if __name__ == "__main__":
    print(dict(load()))
