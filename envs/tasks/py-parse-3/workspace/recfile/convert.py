"""Typed access to records."""


def typed(records, types):
    """Copy of records with the named columns converted, e.g. {"qty": int}.

    Empty strings become None instead of being converted.
    """
    out = []
    for record in records:
        row = dict(record)
        for column, kind in types.items():
            value = row.get(column)
            row[column] = None if value in ("", None) else kind(value)
        out.append(row)
    return out
