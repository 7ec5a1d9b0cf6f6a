"""tally: per-team response-time statistics."""
