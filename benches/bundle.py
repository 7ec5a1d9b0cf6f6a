"""Bundle throughput: `arbor bundle export` and `import` of a real workspace, whole processes.

A workspace of FILES files (MB megabytes of random bytes in all) is imported as `base`, one small
step is committed on it (`next`), and then, REPEAT times: the full bundle of `next` is written to a
file, imported into a fresh store, and the incremental bundle `--since base` is written. Reports
medians: MB/s of file content for export and import (verified import: every object and file
re-hashed, every layer rebuilt and compared with its tree), and the bytes of the full against the
incremental bundle. Writes target/arbor-bench/bundle.{md,json}.

Run: ``python benches/bundle.py [--arbor target/release/arbor] [--files 2000] [--mb 100] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent


def run(arbor: str, home: Path, *args: str) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run([arbor, "--home", str(home), *args], capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"arbor {' '.join(args)} failed: {out.stderr}")
    return dt, out.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arbor", default=str(REPO / "target" / "release" / "arbor"))
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "target" / "arbor-bench")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="arbor-bundle-bench-") as d:
        root = Path(d)
        src = root / "src"
        per = args.mb * 1_000_000 // args.files
        for i in range(args.files):
            p = src / f"d{i % 50}" / f"f{i}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(os.urandom(per))
        a = root / "a"
        run(args.arbor, a, "import", str(src), "--tag", "base")
        run(args.arbor, a, "exec", "base", "--commit", "--tag", "next", "--", "echo one more line >> d0/f0.bin")
        exp, imp, full_b, inc_b, inc_t = [], [], 0, 0, []
        content = 0
        for k in tqdm(range(args.repeat), desc="bundle export/import"):
            full = root / f"full{k}.bundle"
            dt, out = run(args.arbor, a, "--json", "bundle", "export", "next", "--out", str(full))
            rep = json.loads(out)
            content = rep["content_bytes"]
            exp.append(dt)
            full_b = full.stat().st_size
            dt, _ = run(args.arbor, root / f"b{k}", "--json", "bundle", "import", str(full))
            imp.append(dt)
            inc = root / f"inc{k}.bundle"
            dt, _ = run(args.arbor, a, "--json", "bundle", "export", "next", "--since", "base", "--out", str(inc))
            inc_t.append(dt)
            inc_b = inc.stat().st_size
            full.unlink()
            shutil.rmtree(root / f"b{k}", ignore_errors=True)
    mb = content / 1e6
    res = {
        "files": args.files,
        "content_mb": mb,
        "export_s": statistics.median(exp),
        "import_s": statistics.median(imp),
        "export_mb_per_s": mb / statistics.median(exp),
        "import_mb_per_s": mb / statistics.median(imp),
        "full_bytes": full_b,
        "incremental_bytes": inc_b,
        "incremental_export_s": statistics.median(inc_t),
        "repeat": args.repeat,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bundle.json").write_text(json.dumps(res, indent=2) + "\n")
    md = (
        f"Bundle of a {args.files}-file, {mb:.0f} MB workspace plus one small step "
        f"(whole `arbor` processes, medians of {args.repeat})\n\n"
        "| measurement | median | rate |\n|---|---|---|\n"
        f"| `bundle export` (full, to a file) | {res['export_s']:.2f} s | {res['export_mb_per_s']:.0f} MB/s |\n"
        f"| `bundle import` (verified, into a fresh store) | {res['import_s']:.2f} s | {res['import_mb_per_s']:.0f} MB/s |\n"
        f"| `bundle export --since base` | {res['incremental_export_s']:.3f} s | |\n"
        f"| bytes: full vs incremental | {full_b:,} vs {inc_b:,} | {full_b / max(inc_b, 1):,.0f}× smaller |\n"
    )
    (args.out / "bundle.md").write_text(md)
    print(md)
    print(f"wrote {args.out / 'bundle.md'}, .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
