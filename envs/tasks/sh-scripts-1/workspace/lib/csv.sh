# Helpers for simple comma-separated files (no quoting, first line = header).

# col_index FILE NAME
# Print the 1-based index of the column whose header is exactly NAME.
# Print nothing when there is no such column.
col_index() {
    head -n 1 -- "$1" | tr -d '\r' | tr ',' '\n' | grep -n -- "$2" | head -n 1 | cut -d: -f1
}

# col_names FILE: print the header names, one per line.
col_names() {
    head -n 1 -- "$1" | tr -d '\r' | tr ',' '\n'
}
