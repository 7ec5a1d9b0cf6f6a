"""Roman numerals (1..3999)."""

_TABLE = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]
_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(number):
    """Return the Roman numeral for 1 <= number <= 3999 (upper case)."""
    if not isinstance(number, int) or not 0 < number < 4000:
        raise ValueError(f"out of range: {number!r}")
    parts = []
    for value, symbol in _TABLE:
        count, number = divmod(number, value)
        parts.append(symbol * count)
    return "".join(parts)


def from_roman(numeral):
    """Parse a Roman numeral (upper or lower case) and return its value.

    A symbol that is smaller than the symbol after it is subtracted
    (IV = 4, XC = 90); every other symbol is added (VI = 6, XX = 20).
    """
    s = numeral.strip().upper()
    if not s or any(ch not in _VALUES for ch in s):
        raise ValueError(f"not a Roman numeral: {numeral!r}")
    total = 0
    for i, ch in enumerate(s):
        value = _VALUES[ch]
        nxt = _VALUES[s[i + 1]] if i + 1 < len(s) else 0
        if value > nxt:
            total += value
        else:
            total -= value
    return total
