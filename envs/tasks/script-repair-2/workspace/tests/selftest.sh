#!/bin/bash
# Self-test for tools/make_bundle.sh: bash tests/selftest.sh
tmp=$(mktemp -d)
fail=0
if ! bash tools/make_bundle.sh "examples/report 2024.txt" "$tmp/out"; then
    echo "FAIL: bundling the example failed"; fail=1
fi
if (cd "$tmp/out" 2>/dev/null && sha256sum -c --quiet SHA256SUMS 2>/dev/null); then
    echo "ok: SHA256SUMS verifies"
else
    echo "FAIL: SHA256SUMS missing or does not verify"; fail=1
fi
if bash tools/make_bundle.sh examples/no-such-file.txt "$tmp/out2" 2>/dev/null; then
    echo "FAIL: a missing input must make the script fail"; fail=1
else
    echo "ok: missing input fails"
fi
if [ -e "$tmp/out2/SHA256SUMS" ]; then
    echo "FAIL: SHA256SUMS written although the bundle failed"; fail=1
fi
rm -rf "$tmp"
[ "$fail" = 0 ] && echo "ALL PASSED"
exit "$fail"
