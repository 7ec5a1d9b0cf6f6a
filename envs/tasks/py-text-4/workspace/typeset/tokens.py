"""Tokenising helpers shared by the typeset modules."""

TRAILING_PUNCT = ",;:.-"


def words(text):
    """Split on any whitespace; no empty words."""
    return text.split()


def is_acronym(word):
    """NASA, BBC, U.S.: upper case with at least two letters."""
    return word.isupper() and sum(ch.isalpha() for ch in word) >= 2


def cap(word):
    """Upper-case the first character, lower-case the rest."""
    return word[:1].upper() + word[1:].lower()
