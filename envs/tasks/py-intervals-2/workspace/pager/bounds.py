"""Index ranges of single pages."""
from .count import page_count


def page_slice(page, per_page, total):
    """Zero-based (start, stop) indices of the items shown on 1-based `page`.

    stop is exclusive and never greater than total, so items[start:stop]
    is exactly the page.  A page outside 1..page_count() raises IndexError.
    """
    pages = page_count(total, per_page)
    if page < 1 or page > pages:
        raise IndexError(f"page {page} is outside 1..{pages}")
    start = (page - 1) * per_page
    stop = start + per_page
    return start, stop
