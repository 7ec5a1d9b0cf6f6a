import secrets
import sys


def issue(name):
    return "%s-%s" % (name, secrets.token_hex(8))


if __name__ == "__main__":
    print(issue(sys.argv[2]))
