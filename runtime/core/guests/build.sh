#!/usr/bin/env bash
# Build Arbor's WebAssembly guests for wasm32-wasip1 from source.
#
# Idempotent and fast when nothing changed (cargo's own freshness check).
# Prints the path of each guest module it produced:
#   target/wasm-guests/arbor-python.wasm   RustPython 0.5.0 REPL (arbor_init/arbor_input/arbor_step)
#
# The first build takes several minutes (RustPython with its frozen standard
# library); the dependency versions are pinned by guests/python/Cargo.lock
# (RustPython's own lock file), hence --locked.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
target_dir="${ARBOR_WASM_GUEST_TARGET:-$root/target/wasm-guests}"

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip1; then
    (cd "$root" && rustup target add wasm32-wasip1)
fi

(cd "$here/python" && CARGO_TARGET_DIR="$target_dir" \
    cargo build --locked --release --target wasm32-wasip1 ${CARGO_QUIET:---quiet})

src="$target_dir/wasm32-wasip1/release/arbor_python_guest.wasm"
dst="$target_dir/arbor-python.wasm"
if ! cmp -s "$src" "$dst" 2>/dev/null; then
    cp "$src" "$dst.tmp" && mv "$dst.tmp" "$dst"
fi
echo "$dst"
