"""Plain-text report."""
from .groups import summarize
from .rows import parse_rows


def _fmt(value):
    return "-" if value is None else f"{value:.1f}"


def format_report(summary):
    """One line per team: 'team: n=3 median=12.0 trimmed=12.5'."""
    return [
        f"{team}: n={stats['n']} median={_fmt(stats['median'])} trimmed={_fmt(stats['trimmed'])}"
        for team, stats in summary.items()
    ]


def report_from_lines(lines, cut=0.1):
    return format_report(summarize(parse_rows(lines), cut))
