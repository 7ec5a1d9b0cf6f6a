"""Word frequencies."""
from .tokens import tokenize


def word_counts(text):
    """A dict mapping each word of text to the number of times it occurs."""
    counts = {}
    for word in tokenize(text):
        counts[word] = counts.get(word, 0) + 1
    return counts
