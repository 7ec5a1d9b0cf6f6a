#!/usr/bin/env python3
"""Roll up a service log.

    python3 tools/rollup.py [CONFIG]

CONFIG (default config/rollup.json) is a JSON object with "input" (the log), "levels" (the
levels to count) and "output" (where the JSON rollup goes; its folder must exist). Log lines
look like "2024-05-01T00:02:11Z LEVEL service message": the rollup counts, for each
configured level, the lines of that level per service.
"""
import json
import os
import sys


def fail(message):
    print("rollup: " + message, file=sys.stderr)
    sys.exit(1)


def main(argv):
    if "-h" in argv or "--help" in argv:
        print(__doc__.strip())
        return
    path = argv[1] if len(argv) > 1 else "config/rollup.json"
    with open(path) as f:
        config = json.load(f)
    try:
        with open(config["input"]) as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read {config['input']}: {getattr(e, 'strerror', None) or e}")
    if not lines:
        fail(f"{config['input']} is empty")
    folder = os.path.dirname(config["output"])
    if folder and not os.path.isdir(folder):
        fail(f"output folder {folder!r} does not exist (create it first)")
    counts = {level: {} for level in config["levels"]}
    total = 0
    for line in lines:
        parts = line.split(None, 3)
        if len(parts) < 3:
            continue
        level, service = parts[1], parts[2]
        if level in counts:
            counts[level][service] = counts[level].get(service, 0) + 1
            total += 1
    rollup = {
        "input": config["input"],
        "lines": len(lines),
        "counted": total,
        "counts": {level: dict(sorted(c.items())) for level, c in counts.items()},
    }
    with open(config["output"], "w") as f:
        json.dump(rollup, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"rollup: counted {total} of {len(lines)} lines, wrote {config['output']}")


if __name__ == "__main__":
    main(sys.argv)
