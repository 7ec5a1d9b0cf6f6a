"""Splitting text into words."""
import re

WORD = re.compile(r"[A-Za-z']+")


def tokenize(text):
    """The words of text, lower-cased, in order. A word is a run of letters and
    apostrophes, so punctuation, digits and whitespace all separate words."""
    return WORD.findall(text)
