"""slots: half-open interval helpers."""
from .merge import merge, total_covered
from .overlap import contains, overlaps
