"""Package index text format: one package per line, "name: req1, req2"."""


def parse_index(text):
    index = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reqs = line.partition(":")
        index[name.strip()] = [r.strip() for r in reqs.split(",") if r.strip()]
    return index
