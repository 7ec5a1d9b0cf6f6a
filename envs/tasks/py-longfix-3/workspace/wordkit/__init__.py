"""wordkit: word frequencies for short texts."""
from .counts import word_counts
from .rank import top_words
from .report import format_top, summary
from .tokens import tokenize

__all__ = ["tokenize", "word_counts", "top_words", "format_top", "summary"]
