from .graph import Graph
from .search import distance, shortest_path

__all__ = ["Graph", "distance", "shortest_path"]
