"""pager: pagination arithmetic."""
from .bounds import page_slice
from .count import page_count
from .labels import nav, page_label
