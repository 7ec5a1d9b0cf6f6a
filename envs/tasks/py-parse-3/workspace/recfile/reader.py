"""Reading whole record files."""
from .fields import split_fields


def read_records(text, sep=","):
    """Parse record text into a list of dicts keyed by the header fields.

    The first line that is not skipped is the header.  Empty lines, lines
    holding only whitespace and lines starting with '#' are skipped.  A
    record with a different number of fields than the header raises
    ValueError naming its line number (counting every line from 1).
    """
    header = None
    records = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.startswith("#"):
            continue
        fields = split_fields(line, sep)
        if header is None:
            header = fields
            continue
        if len(fields) != len(header):
            raise ValueError(f"line {number}: expected {len(header)} fields, got {len(fields)}")
        records.append(dict(zip(header, fields)))
    return records
