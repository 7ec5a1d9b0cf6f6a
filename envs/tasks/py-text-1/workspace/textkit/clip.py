"""Shorten text for previews."""


def clip(text, width, ellipsis="..."):
    """Return ``text`` shortened to at most ``width`` characters.

    Text that already fits is returned unchanged.  Longer text is cut and ends
    with ``ellipsis``; the ellipsis counts towards ``width``.
    """
    if len(text) <= width:
        return text
    return text[:width] + ellipsis
