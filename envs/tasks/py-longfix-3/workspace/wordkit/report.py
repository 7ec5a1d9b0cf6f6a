"""Text reports of word frequencies."""
from .counts import word_counts
from .rank import top_words


def format_top(pairs):
    """One "word: count" line per (word, count) pair."""
    return "\n".join(f"{word}: {count}" for word, count in pairs)


def summary(text, n=3):
    """The report of the n most frequent words of text."""
    return format_top(top_words(word_counts(text), n))
