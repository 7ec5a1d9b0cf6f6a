"""One-call summary used by the dashboard."""
from .rank import percentile
from .window import moving_average


def summarize(xs, size=3):
    """Dict with the count, median (p50), p90 and the largest moving average."""
    averages = moving_average(xs, size)
    return {
        "count": len(xs),
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "peak_average": max(averages) if averages else None,
    }
