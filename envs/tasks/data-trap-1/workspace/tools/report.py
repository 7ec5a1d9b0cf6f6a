#!/usr/bin/env python3
"""Revenue report.

    python3 tools/report.py CONFIG [--dry-run]

CONFIG is a JSON file with "input" (a CSV export with the columns region, product, units
and unit_price_cents), "group_by" (the column to group by), "measure" ("revenue": units x
unit price in cents, or "units") and "output" (where the JSON report goes). Exact duplicate
rows of the export are counted once. --dry-run prints the report instead of writing it.
"""
import csv
import json
import os
import sys


def fail(message):
    print("report: " + message, file=sys.stderr)
    sys.exit(1)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    dry_run = "--dry-run" in argv[2:]
    with open(argv[1]) as f:
        config = json.load(f)
    try:
        with open(config["input"], newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"cannot read {config['input']}: {e.strerror}")
    if not rows:
        fail(f"{config['input']} has no data rows")
    columns = list(rows[0].keys())
    key = config["group_by"]
    if key not in columns:
        fail(f"unknown column {key!r} in group_by (columns: {', '.join(columns)})")
    measure = config["measure"]
    if measure not in ("revenue", "units"):
        fail(f"unknown measure {measure!r} (revenue or units)")
    seen = set()
    totals = {}
    for row in rows:
        ident = tuple(row[c] for c in columns)
        if ident in seen:
            continue
        seen.add(ident)
        units = int(row["units"])
        value = units * int(row["unit_price_cents"]) if measure == "revenue" else units
        totals[row[key]] = totals.get(row[key], 0) + value
    report = {
        "group_by": key,
        "measure": measure,
        "rows": len(seen),
        "totals": dict(sorted(totals.items())),
        "grand_total": sum(totals.values()),
    }
    text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    if dry_run:
        print(text, end="")
        return
    folder = os.path.dirname(config["output"])
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(config["output"], "w") as f:
        f.write(text)
    print(f"report: {len(seen)} rows, wrote {config['output']}")


if __name__ == "__main__":
    main(sys.argv)
