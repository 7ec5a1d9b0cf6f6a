"""URL slugs."""
import re


def slugify(text, sep="-"):
    """Return a URL slug for ``text``.

    The slug is lower-case and contains only the ASCII letters a-z, the digits
    0-9 and ``sep``.  Every run of other characters (spaces, punctuation,
    underscores, accents, ...) becomes a single ``sep``; the slug never starts
    or ends with ``sep``.
    """
    text = text.strip().lower()
    text = re.sub(r"[^a-z0-9]", sep, text)
    return text.strip(sep)
