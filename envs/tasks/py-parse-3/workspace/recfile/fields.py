"""Splitting one record line into fields."""


def split_fields(line, sep=","):
    """Split one record line into a list of field strings.

    A field may be wrapped in double quotes.  A quoted field may contain the
    separator, and inside it a doubled quote ("") stands for one literal
    quote character.  Whitespace around a quoted field is ignored and its
    text is kept exactly as written between the quotes.  Unquoted fields
    are stripped of surrounding whitespace.  Anything other than whitespace
    between a closing quote and the next separator raises ValueError, and so
    does a quote that is never closed.
    """
    fields = []
    buf = []
    quoted = False       # currently inside quotes
    was_quoted = False   # the current field was a quoted one
    i = 0
    while i < len(line):
        ch = line[i]
        if quoted:
            if ch == '"':
                quoted = False
            else:
                buf.append(ch)
        elif ch == sep:
            fields.append(_finish(buf, was_quoted))
            buf = []
            was_quoted = False
        elif was_quoted:
            if not ch.isspace():
                raise ValueError(f"text after closing quote at column {i + 1}")
        elif ch == '"' and not "".join(buf).strip():
            quoted = True
            was_quoted = True
            buf = []
        else:
            buf.append(ch)
        i += 1
    if quoted:
        raise ValueError("unterminated quoted field")
    fields.append(_finish(buf, was_quoted))
    return fields


def _finish(buf, was_quoted):
    text = "".join(buf)
    return text if was_quoted else text.strip()
