"""Bundle throughput: `arbor bundle export` and `import` of a real workspace, whole processes.

A workspace of FILES files (MB megabytes of random bytes in all) is imported as `base`, one small
step is committed on it (`next`), and then, REPEAT times: the full bundle of `next` is written to a
file, imported into a fresh store, and the incremental bundle `--since base` is written. Reports
medians: MB/s of file content for export and import (verified import: every object and file
re-hashed, every layer rebuilt and compared with its tree), and the bytes of the full against the
incremental bundle. Then, against a real S3 server on loopback (s3s-fs, ``$ARBOR_S3_SERVER``, else
target/tools/bin/s3s-fs, which .ci/prerequisites builds; the server writes to the same disk), REPEAT
times into a fresh prefix: ``arbor push`` of ``base`` (everything), ``arbor push`` of ``next`` (the
step only) and ``arbor pull`` of ``next`` into a fresh store (every byte verified), as MB/s of file
content and bytes sent. Writes target/arbor-bench/bundle.{md,json}.

Run: ``python benches/bundle.py [--arbor target/release/arbor] [--files 2000] [--mb 100] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
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


def s3_server() -> str | None:
    path = os.environ.get("ARBOR_S3_SERVER") or str(REPO / "target" / "tools" / "bin" / "s3s-fs")
    return path if os.access(path, os.X_OK) else None


def start_s3(server: str, data: Path) -> tuple[subprocess.Popen, int]:
    (data / "bench").mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [server, "--host", "127.0.0.1", "--port", str(port), "--access-key", "bench", "--secret-key", "bench", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise SystemExit("the S3 server did not start")


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
        server = s3_server()
        push_full, push_inc, pull, push_inc_b = [], [], [], 0
        if server:
            os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
            proc, port = start_s3(server, root / "s3")
            try:
                for k in tqdm(range(args.repeat), desc="S3 push/pull"):
                    run(args.arbor, a, "remote", "add", f"r{k}", f"s3://bench/r{k}", "--endpoint", f"http://127.0.0.1:{port}")
                    dt, _ = run(args.arbor, a, "--json", "push", f"r{k}", "base")
                    push_full.append(dt)
                    dt, out = run(args.arbor, a, "--json", "push", f"r{k}", "next")
                    push_inc.append(dt)
                    push_inc_b = json.loads(out)["bytes_sent"]
                    c = root / f"c{k}"
                    run(args.arbor, c, "remote", "add", f"r{k}", f"s3://bench/r{k}", "--endpoint", f"http://127.0.0.1:{port}")
                    dt, _ = run(args.arbor, c, "--json", "pull", f"r{k}", "next")
                    pull.append(dt)
                    shutil.rmtree(c, ignore_errors=True)
                    shutil.rmtree(root / "s3" / "bench" / f"r{k}", ignore_errors=True)
            finally:
                proc.kill()
                proc.wait()
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
    if push_full:
        res.update(
            s3_push_s=statistics.median(push_full),
            s3_push_mb_per_s=mb / statistics.median(push_full),
            s3_push_incremental_s=statistics.median(push_inc),
            s3_push_incremental_bytes=push_inc_b,
            s3_pull_s=statistics.median(pull),
            s3_pull_mb_per_s=mb / statistics.median(pull),
        )
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
    if push_full:
        md += (
            f"| `push` of `base` to S3 (s3s-fs on loopback, fresh prefix) | {res['s3_push_s']:.2f} s | {res['s3_push_mb_per_s']:.0f} MB/s |\n"
            f"| `push` of `next` after it (the step only) | {res['s3_push_incremental_s']:.3f} s | {push_inc_b:,} bytes sent |\n"
            f"| `pull` of `next` into a fresh store (verified) | {res['s3_pull_s']:.2f} s | {res['s3_pull_mb_per_s']:.0f} MB/s |\n"
        )
    else:
        md += "\n(no S3 server: set ARBOR_S3_SERVER or run .ci/prerequisites for the push/pull rows)\n"
    (args.out / "bundle.md").write_text(md)
    print(md)
    print(f"wrote {args.out / 'bundle.md'}, .json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
