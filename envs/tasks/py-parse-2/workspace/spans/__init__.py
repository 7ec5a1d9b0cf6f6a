"""spans: human-readable durations."""
from .duration import format_duration, parse_duration
