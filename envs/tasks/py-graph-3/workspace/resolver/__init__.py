from .components import connected_components, same_component
from .errors import CycleError, MissingPackage, ResolveError
from .index import parse_index
from .install import install_order
from .unionfind import DisjointSet

__all__ = ["CycleError", "DisjointSet", "MissingPackage", "ResolveError", "connected_components",
           "install_order", "parse_index", "same_component"]
