"""Put the pieces together for printed headings."""
from .titlecase import title_case
from .wrap import wrap


def heading(text, width=40):
    """Title-case ``text`` and wrap it to ``width``; returns one string."""
    return "\n".join(wrap(title_case(text), width))
