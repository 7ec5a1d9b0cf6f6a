#!/bin/bash
# Visible tests for rotate.sh.  Run from the project root: bash tests/run.sh
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # check NAME EXPECTED ACTUAL
    if [ "$2" == "$3" ]; then
        echo "ok   $1"
    else
        echo "FAIL $1: expected '$2', got '$3'"
        fail=1
    fi
}

cd "$tmp" || exit 1
echo newest > app.log
echo middle > app.log.1
echo oldest > app.log.2
check "output" "rotated app.log" "$(bash "$root/rotate.sh" -k 3 app.log)"
check "new log is empty" "0" "$(wc -c < app.log)"
check "app.log.1" "newest" "$(cat app.log.1 2>&1)"
check "app.log.2" "middle" "$(cat app.log.2 2>&1)"
check "app.log.3" "oldest" "$(cat app.log.3 2>&1)"

echo a > one.log
echo b > one.log.1
bash "$root/rotate.sh" -k 1 one.log > /dev/null
check "keep 1" "a" "$(cat one.log.1 2>&1)"
check "keep 1, nothing older" "" "$(ls one.log.2 2>/dev/null)"

bash "$root/rotate.sh" missing.log 2>/dev/null
check "missing log exits 2" "2" "$?"
exit $fail
