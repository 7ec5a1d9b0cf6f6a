"""Per-team grouping and summaries."""
from .order import median, trimmed_mean


def group_values(rows):
    """Map team -> list of its measurements, teams in order of first appearance."""
    groups = {}
    for row in rows:
        if row["ms"] is None:
            continue
        groups.setdefault(row["team"], []).append(row["ms"])
    return groups


def summarize(rows, cut=0.1):
    """Map team -> {"n": count, "median": ..., "trimmed": ...}."""
    summary = {}
    for team, values in group_values(rows).items():
        summary[team] = {
            "n": len(values),
            "median": median(values),
            "trimmed": trimmed_mean(values, cut),
        }
    return summary
