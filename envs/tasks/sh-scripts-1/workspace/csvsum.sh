#!/bin/bash
# csvsum.sh FILE COLUMN
#
# Print the sum of the values in column COLUMN (chosen by its header name) of
# the comma-separated FILE, always with two decimals (e.g. "12.50").
# Empty cells count as 0.  Exit status 2, with a message on stderr, when FILE
# or COLUMN does not exist.
here=$(dirname "$0")
. "$here/lib/csv.sh"

if [ $# -ne 2 ]; then
    echo "usage: csvsum.sh FILE COLUMN" >&2
    exit 2
fi
file=$1
column=$2
if [ ! -f "$file" ]; then
    echo "csvsum: $file: no such file" >&2
    exit 2
fi
idx=$(col_index "$file" "$column")
if [ -z "$idx" ]; then
    echo "csvsum: $column: no such column" >&2
    exit 2
fi
awk -F, -v c="$idx" 'NR > 1 && $c != "" { sum += $c } END { printf "%d\n", sum }' "$file"
