"""Digit grouping for human-readable numbers."""


def group_digits(n, sep=","):
    """Group the digits of the integer ``n`` in threes: 1234567 -> "1,234,567".

    Negative numbers keep their sign in front: -1234 -> "-1,234".
    """
    s = str(n)
    groups = []
    while len(s) > 3:
        groups.insert(0, s[-3:])
        s = s[:-3]
    groups.insert(0, s)
    return sep.join(groups)


def format_number(x, decimals=2, sep=","):
    """Format ``x`` with grouped digits and exactly ``decimals`` decimals.

    format_number(1234.5) -> "1,234.50"; format_number(-9876543.219, 1) -> "-9,876,543.2"
    """
    text = f"{abs(x):.{decimals}f}"
    whole, dot, frac = text.partition(".")
    negative = x < 0 and float(text) != 0.0
    grouped = group_digits(int(whole), sep)
    return ("-" if negative else "") + grouped + dot + frac
