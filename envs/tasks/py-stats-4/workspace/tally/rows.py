"""Parsing of 'team,ms' log lines."""


def parse_rows(lines):
    """Turn 'team,ms' lines into dicts {"team": str, "ms": float or None}.

    Blank lines are skipped.  An empty ms field means the request was not
    measured and gives None.
    """
    rows = []
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        team, sep, ms = line.partition(",")
        if not sep or not team.strip():
            raise ValueError(f"line {number}: expected 'team,ms'")
        ms = ms.strip()
        rows.append({"team": team.strip(), "ms": float(ms) if ms else None})
    return rows
