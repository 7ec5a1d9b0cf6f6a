#!/usr/bin/env bash
# The Arbor demo (`make demo`): import a small Python project as a snapshot,
# fork it four ways with `arbor fanout`, and show what each fork changed.
# Uses a throw-away store; pass the binary as $ARBOR (default: the release build).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ARBOR="${ARBOR:-$root/target/release/arbor}"
if [[ ! -x "$ARBOR" ]]; then
    echo "demo: $ARBOR not found; run \`cargo build --release -p arbor\` (or \`make demo\`)" >&2
    exit 1
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/arbor-demo.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
# A subdirectory: the store root must be searchable by the sandbox's uid,
# and mktemp makes its directory 0700.
export ARBOR_HOME="$scratch/home"
started=$(date +%s.%N)

# One stream, so that the commands' stdout and stderr stay in order when piped.
exec 2>&1
if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
heading() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
note() { printf '   (%s)\n' "$*"; }
# An argument as the shell would need it typed.
quote() {
    if [[ "$1" =~ ^[A-Za-z0-9_./=:@%+-]+$ ]]; then
        printf '%s' "$1"
    elif [[ "$1" != *"'"* ]]; then
        printf "'%s'" "$1"
    else
        local s="${1//\\/\\\\}"
        s="${s//\"/\\\"}"
        s="${s//\$/\\\$}"
        s="${s//\`/\\\`}"
        printf '"%s"' "$s"
    fi
}
# Show a command line, then run it.
run() {
    local line="$" arg
    for arg in "$@"; do line+=" $(quote "$arg")"; done
    printf '%s\n' "$line"
    "$@"
}
arbor() { "$ARBOR" "$@"; }

heading "1. Import the sample workspace (store: $ARBOR_HOME)"
ls "$here/sample"
run arbor import "$here/sample" --tag base
run arbor ls

heading "2. Fork it four ways, concurrently, and commit each result"
run arbor fanout base --commit --tag-prefix fork \
    --cmd "sed -i 's/^VERSION = .*/VERSION = \"0.2.0\"/' stats.py && grep ^VERSION stats.py" \
    --cmd "printf '## 0.2.0\n\n- forked by arbor\n' > CHANGELOG.md && echo wrote CHANGELOG.md" \
    --cmd "python3 -m unittest 2>&1 | grep -E '^(Ran|OK|FAILED)' | paste -sd ' ' -" \
    --cmd "rm README.md && ls"

heading "3. What each fork changed, relative to the base"
for i in 1 2 3 4; do
    run arbor diff base "fork-$i"
done
note "fork-3 only ran the tests: they wrote nothing, since the fixed environment sets PYTHONDONTWRITEBYTECODE=1"

heading "4. Forks are independent: the base and the other forks are untouched"
run arbor exec base -- grep ^VERSION stats.py
run arbor exec fork-4 -- grep ^VERSION stats.py
run arbor exec fork-1 -- 'ls CHANGELOG.md 2>&1 || true'

heading "5. Continue from a fork: run the tests on the edited version and commit"
run arbor exec fork-1 --commit --tag fork-1-tested -- python3 -m unittest -v

heading "6. The chain of actions behind that snapshot"
run arbor log fork-1-tested

heading "7. Replay that chain from its root in fresh forks and compare every observation"
note "unittest prints its own duration, so that step may be reported divergent: replay names it"
run arbor replay fork-1-tested || true

heading "8. A bundled task, graded by the layered verifier: its gold solution and an attack"
run arbor task show py-stats-1 | head -12
printf '[{"exec": "echo all tests passed"}, {"write": "conftest.py", "content": "import os\\n"}]\n' >"$scratch/attack.json"
run arbor task run py-stats-1 --actions "$scratch/attack.json" | tail -6

heading "9. Branched rollouts: fork real snapshots where the policy branches, then credit"
out="$root/target/arbor-demo"
mkdir -p "$out"
run arbor rollout --task py-stats-1 --policy mixture:0.6 --branch uniform:3:2 --budget 60 --out "$out/trees.json"
run arbor credit "$out/trees.json" --export "$out/advantages.jsonl" --pairs "$out/pairs.jsonl" --plot "$out/tree.svg"
note "kept after the demo: one advantage record per edge in $out/advantages.jsonl, the tree drawn in $out/tree.svg"

heading "10. A live Python session (WebAssembly backend): fork its memory, not only its files"
note "the guest is RustPython compiled to wasm32-wasip1; a command is one step of code in the session"
run arbor import --wasm python --tag py
run arbor exec py --commit --tag session -- 'import statistics; data = [3, 1, 4, 1, 5, 9, 2, 6]; model = {"mean": statistics.mean(data)}; model'
run arbor fanout session --commit --tag-prefix branch \
    --cmd 'data.append(100); model["mean"] = statistics.mean(data); model' \
    --cmd 'data.sort(); data[:3]' \
    --cmd 'model, len(data)'
note "each fork started from the same interpreter state: the third still sees 8 values and the original mean"
run arbor log branch-1
run arbor diff session branch-1
run arbor replay branch-1

heading "11. Collect garbage (what no tag reaches), then verify the whole store"
run arbor gc
run arbor fsck

heading "12. Train: the labelled SMOKE version of the experiment (one seed per arm, small budget)"
note "GRPO, branch-point PPO with segment credit and VinePPO-style Monte Carlo from one behaviour cloning, at an equal budget; the full run is \`make experiment\`"
note "arbor train runs in the arbor-train binary (libtorch); arbor execs it, so arbor itself starts in milliseconds"
if [ -x "$(dirname "$ARBOR")/arbor-train" ]; then
    run arbor train --compare --smoke --out "$out/train-smoke"
    note "smoke table: $out/train-smoke/report.md; learning curve: $out/train-smoke/learning-curve.png"
else
    note "no arbor-train next to $ARBOR (make demo builds it: cargo build --release -p arbor-train)"
fi

finished=$(date +%s.%N)
heading "Done in $(awk -v a="$started" -v b="$finished" 'BEGIN { printf "%.1f", b - a }') s"
