"""Word-aware truncation."""
from . import tokens


def truncate(text, limit, ellipsis="\u2026"):
    """Shorten ``text`` to at most ``limit`` characters, ellipsis included.

    Whitespace runs are collapsed first; text that then fits is returned as
    is.  Otherwise as many whole words as fit are kept (together with the
    ellipsis), trailing punctuation is dropped from the kept part and
    ``ellipsis`` is appended.  If not even the first word fits, it is cut.
    """
    text = " ".join(tokens.words(text))
    if len(text) <= limit:
        return text
    budget = limit - 1
    kept = ""
    for word in tokens.words(text):
        candidate = f"{kept} {word}" if kept else word
        if len(candidate) > budget:
            break
        kept = candidate
    if not kept:
        kept = text[:budget]
    return kept.rstrip(tokens.TRAILING_PUNCT) + ellipsis
