"""Ranking words by frequency."""


def top_words(counts, n):
    """The n most frequent (word, count) pairs of the counts dict: the highest count
    first, and words with equal counts in alphabetical order."""
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    return ranked[:n]
