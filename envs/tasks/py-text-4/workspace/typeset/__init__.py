"""typeset: headline casing, truncation and filling."""
from .headline import headline
from .truncate import truncate
from .wrap import fill

__all__ = ["fill", "headline", "truncate"]
