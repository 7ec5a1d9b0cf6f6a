"""Parser for `key = value` configuration text."""
from .values import convert


def parse_config(text):
    """Parse `key = value` lines into a dict.

    Blank lines and lines whose first non-blank character is '#' are
    ignored.  Whitespace around keys and values is stripped and values are
    converted with values.convert().  Only the first '=' separates the key
    from the value.  Any other line raises ValueError naming its line number.
    """
    result = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise ValueError(f"line {number}: expected key = value")
        key, value = line.split("=", 1)
        result[key.strip()] = convert(value.strip())
    return result
