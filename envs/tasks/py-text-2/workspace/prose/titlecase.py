"""Title case with exceptions for small words and acronyms."""

SMALL_WORDS = frozenset(
    "a an and as at but by for from in into nor of on or over the to via with".split()
)


def is_acronym(word):
    """NASA, HTTP, UK: all upper case and longer than one letter."""
    return len(word) > 1 and word.isupper()


def title_case(text, small_words=SMALL_WORDS):
    """Title-case ``text``.

    Every word is capitalised (first letter upper, rest lower) except:
      * acronyms (see ``is_acronym``) are kept as they are;
      * words in ``small_words`` are written in lower case -- unless they are
        the first or the last word, which are always capitalised.
    Words are re-joined with single spaces.
    """
    words = text.split()
    out = []
    for i, word in enumerate(words):
        if is_acronym(word):
            out.append(word)
        elif word.lower() in small_words and 0 < i < len(words):
            out.append(word.lower())
        else:
            out.append(word[:1].upper() + word[1:].lower())
    return " ".join(out)
