"""Headline (title) casing."""
from . import tokens

MINOR_WORDS = frozenset(
    "a an and as at but by en for if in nor of on or per the to v vs via".split()
)


def _case_word(word, minor, force):
    """Case one whitespace-separated word; hyphenated compounds part by part.

    ``force`` means the word is first or last in the headline (or follows a
    colon): its FIRST part is capitalised even when it is a minor word.  The
    other parts of a compound follow the normal rules.
    """
    parts = word.split("-")
    cased = []
    for j, part in enumerate(parts):
        if tokens.is_acronym(part):
            cased.append(part)
        elif part.lower() in minor and not force:
            cased.append(part.lower())
        else:
            cased.append(tokens.cap(part))
    return "-".join(cased)


def headline(text, minor=MINOR_WORDS):
    """Return ``text`` in headline case (see ``_case_word``)."""
    ws = tokens.words(text)
    out = []
    for i, word in enumerate(ws):
        force = i == 0 or i == len(ws) - 1 or ws[i - 1].endswith(":")
        out.append(_case_word(word, minor, force))
    return " ".join(out)
