"""series: small helpers for numeric time series."""
