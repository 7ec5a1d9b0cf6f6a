"""recfile: small reader for comma-separated record files."""
from .convert import typed
from .fields import split_fields
from .reader import read_records
