"""How many bytes a cached value costs."""


def size_of(value):
    """Approximate size of value in bytes.

    str counts its UTF-8 length, bytes/bytearray their length, int and
    float 8 bytes, None 0, and lists/tuples the sum of their items.
    """
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, (bool, int, float)):
        return 8
    if isinstance(value, (list, tuple)):
        return sum(size_of(item) for item in value)
    raise TypeError(f"cannot size {type(value).__name__}")
