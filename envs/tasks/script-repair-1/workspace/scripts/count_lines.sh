#!/bin/bash
# Usage: count_lines.sh INPUT_DIR OUTPUT_FILE
# Writes one line "<file name> <number of lines>" for every .txt file directly in INPUT_DIR,
# in file-name order, into OUTPUT_FILE (replacing whatever OUTPUT_FILE held before).
in_dir=$1
out=$2

: > "$out"
for f in $(ls $in_dir/*.txt); do
    n=$(wc -l < "$f")
    echo "$(basename "$f") $n" > "$out"
done
