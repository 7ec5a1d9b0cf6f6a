"""Paragraph filling with a hanging indent."""
from . import tokens


def fill(text, width, indent=""):
    """Greedy fill: first line flush left, continuation lines start with ``indent``.

    Every line, indent included, is at most ``width`` characters unless a single
    word is longer than that.
    """
    lines = []
    line = ""
    for word in tokens.words(text):
        prefix = indent if lines else ""
        if not line:
            line = prefix + word
        elif len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = indent + word
    if line:
        lines.append(line)
    return "\n".join(lines)
