"""prose: formatting helpers for headings and paragraphs."""
from .layout import heading
from .titlecase import title_case
from .wrap import wrap

__all__ = ["heading", "title_case", "wrap"]
