"""Greedy word wrapping."""


def wrap(text, width):
    """Wrap ``text`` into a list of lines of at most ``width`` characters.

    Words are separated by single spaces.  The algorithm is greedy: a word is
    put on the current line whenever the line (with the joining space) still
    fits in ``width``; otherwise a new line is started.  A single word longer
    than ``width`` is put on a line of its own (it is never split).
    Empty or blank text gives an empty list.
    """
    lines = []
    current = ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines
