#!/bin/bash
# Usage: make_bundle.sh SRC_FILE OUT_DIR
# Copies SRC_FILE into OUT_DIR, compresses the copy there (OUT_DIR/<name>.gz) and writes
# OUT_DIR/SHA256SUMS with the checksum of the .gz file.
# If any step fails, the script must stop at once with a non-zero exit status.
. "$(dirname "$0")/lib.sh"

src=$1
out=$2

mkdir -p "$out"
cp "$src" "$out/"
gzip -nf "$out/$(basename "$src")"
sums=$(checksum "$out/$(basename "$src").gz")
echo "$sums" > "$out/SHA256SUMS"
log "bundle ready in $out"
