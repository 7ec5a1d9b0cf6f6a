#!/bin/bash
# Usage: summarize.sh INPUT_CSV OUTPUT_FILE
# INPUT_CSV starts with the header line "date,category,amount,note"; the note may contain
# spaces and commas, and the last line may lack a final newline. Writes into OUTPUT_FILE
# (replacing its old content) one line "<category>,<total>" per category, sorted by
# category, totals with two decimals, and then a last line "TOTAL,<grand total>".
set -euo pipefail
in=$1
out=$2

declare -A totals=()
grand=0.00
while IFS=, read -r date category amount note; do
    totals[$category]=$(awk -v a="${totals[$category]:-0}" -v b="$amount" 'BEGIN { printf "%.2f", a + b }')
    grand=$(awk -v a="$grand" -v b="$amount" 'BEGIN { printf "%.2f", a + b }')
done < "$in"

for c in "${!totals[@]}"; do
    printf '%s,%s\n' "$c" "${totals[$c]}"
done | sort > "$out"
printf 'TOTAL,%s\n' "$grand" > "$out"
