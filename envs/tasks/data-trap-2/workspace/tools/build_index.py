#!/usr/bin/env python3
"""Build the user index.

    python3 tools/build_index.py [--check]

Reads config/pipeline.ini: [input] path (a JSON list of user records) and [index] key (the
record field to index by) and output (where the index goes). Writes a JSON object mapping
each record's lower-cased key to its id and team. Refuses to run while <path>.lock exists
(another run in progress). --check validates the config and the records and writes nothing.
"""
import configparser
import json
import os
import sys


def fail(message):
    print("build_index: " + message, file=sys.stderr)
    sys.exit(1)


def main(argv):
    if "-h" in argv or "--help" in argv:
        print(__doc__.strip())
        return
    config = configparser.ConfigParser()
    if not config.read("config/pipeline.ini"):
        fail("cannot read config/pipeline.ini")
    path = config["input"]["path"]
    key = config["index"]["key"]
    output = config["index"]["output"]
    if os.path.exists(path + ".lock"):
        fail(f"{path}.lock exists: another run is in progress (or a crashed run left it)")
    try:
        with open(path) as f:
            records = json.load(f)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    index = {}
    for i, record in enumerate(records):
        if key not in record:
            fail(f"record {i} has no field {key!r} (fields: {', '.join(sorted(record))})")
        k = str(record[key]).lower()
        if k in index:
            fail(f"duplicate key {k!r}")
        index[k] = {"id": record["id"], "team": record["team"]}
    if "--check" in argv:
        print(f"build_index: ok, {len(index)} records (nothing written)")
        return
    folder = os.path.dirname(output)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(output, "w") as f:
        json.dump(dict(sorted(index.items())), f, indent=2)
        f.write("\n")
    print(f"build_index: {len(index)} records, wrote {output}")


if __name__ == "__main__":
    main(sys.argv)
