"""Text shown under the list."""
from .bounds import page_slice
from .count import page_count


def page_label(page, per_page, total):
    """'Items 4-6 of 10' (1-based, inclusive), or 'No items' for an empty list."""
    if total == 0:
        return "No items"
    start, stop = page_slice(page, per_page, total)
    return f"Items {start + 1}-{stop} of {total}"


def nav(page, per_page, total):
    """(previous page or None, next page or None)."""
    pages = page_count(total, per_page)
    previous = page - 1 if page > 1 else None
    following = page + 1 if page < pages else None
    return previous, following
