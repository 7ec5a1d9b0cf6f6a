"""How many pages a list needs."""


def page_count(total, per_page):
    """Number of pages needed to show `total` items, `per_page` per page.

    Zero items still give one (empty) page.
    """
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    if total < 0:
        raise ValueError("total must not be negative")
    return max(1, total // per_page)
