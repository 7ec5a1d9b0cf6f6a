#!/bin/bash
# Visible tests for csvsum.sh.  Run from the project root: bash tests/run.sh
cd "$(dirname "$0")/.." || exit 1
fail=0
check() {  # check NAME EXPECTED ACTUAL
    if [ "$2" == "$3" ]; then
        echo "ok   $1"
    else
        echo "FAIL $1: expected '$2', got '$3'"
        fail=1
    fi
}
check "qty column" "18.00" "$(bash csvsum.sh tests/data/sales.csv qty)"
check "price column" "21.25" "$(bash csvsum.sh tests/data/sales.csv price)"
bash csvsum.sh tests/data/sales.csv discount 2>/dev/null
check "unknown column exits 2" "2" "$?"
bash csvsum.sh tests/data/missing.csv qty 2>/dev/null
check "missing file exits 2" "2" "$?"
exit $fail
