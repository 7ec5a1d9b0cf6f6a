"""textkit: small text helpers."""
from .slug import slugify
from .clip import clip

__all__ = ["slugify", "clip"]
