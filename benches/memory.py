"""Memory per sandbox: what one idle sandbox and 64 idle forks add to the machine.

A private ``arbor serve`` (the release binary) imports a workspace of FILES files; after it settles
(its warm pool full), the memory of the server and of every process below it is read, then again
after one sandbox is opened on the snapshot (``true`` run in it, so it is fully started), and again
after 64 more are forked from it (``true`` run in each). Each figure is the difference between two
readings (marginal, per sandbox):

- user memory: the sum over the server and all its descendant processes (helpers and the shells
  they run) of PSS (proportional set size: shared pages are split between their users, so the sum
  is what the processes really occupy) and of RSS (every mapped page counted in each process), from
  ``/proc/PID/smaps_rollup``;
- kernel memory: ``Slab + KernelStack + PageTables`` from ``/proc/meminfo`` (namespaces, mounts,
  dentries and inodes, task structs, stacks and page tables), and the drop of ``MemAvailable``
  (everything, page cache included). These are machine-wide: other work on the machine moves them,
  so run this bench on a quiet machine; each figure is the median of REPEAT runs on fresh servers.

Writes target/arbor-bench/memory.{md,json}.

Run: ``python benches/memory.py [--arbor target/release/arbor] [--files 100] [--forks 64] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

from arbor import Client  # noqa: E402
from arbor.local import descendants as local_descendants  # noqa: E402

KERNEL_FIELDS = ("Slab", "KernelStack", "PageTables")


def tree(root: int) -> list[int]:
    return [root, *local_descendants(root)]


def rollup(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in kB; (0, 0) when it is gone or has no memory (a kernel thread)."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key == "Rss":
                rss = int(rest.split()[0])
            elif key == "Pss":
                pss = int(rest.split()[0])
    except (OSError, ValueError):
        pass
    return rss, pss


def meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        out[key] = int(rest.split()[0])
    return out


def reading(server_pid: int) -> dict[str, float]:
    time.sleep(1.5)  # let the warm pool refill and the shells settle
    pids = tree(server_pid)
    mem = [rollup(p) for p in pids]
    info = meminfo()
    return {
        "processes": len(pids),
        "rss_kb": sum(r for r, _ in mem),
        "pss_kb": sum(p for _, p in mem),
        "kernel_kb": sum(info.get(k, 0) for k in KERNEL_FIELDS),
        "available_kb": info["MemAvailable"],
    }


def delta(a: dict[str, float], b: dict[str, float], n: int) -> dict[str, float]:
    return {
        "processes": (b["processes"] - a["processes"]) / n,
        "pss_mib": (b["pss_kb"] - a["pss_kb"]) / n / 1024,
        "rss_mib": (b["rss_kb"] - a["rss_kb"]) / n / 1024,
        "kernel_mib": (b["kernel_kb"] - a["kernel_kb"]) / n / 1024,
        "available_drop_mib": (a["available_kb"] - b["available_kb"]) / n / 1024,
    }


def one_run(arbor: str, work: Path, files: int, forks: int) -> dict[str, dict[str, float]]:
    src = work / "src"
    src.mkdir(parents=True)
    for i in range(files):
        (src / f"f{i:04}.txt").write_text(f"file {i}\n" * 100)
    home = work / "home"
    with Client.local(home, binary=arbor) as client:
        pid = client.server.pid
        snap = client.import_dir(src, tag="base")
        # Settle the pool with one sandbox opened and closed first.
        with snap.sandbox() as warm:
            warm.exec("true")
        base = reading(pid)
        one = snap.sandbox()
        one.exec("true")
        after_one = reading(pid)
        many = snap.fork(forks)
        for sb in many:
            sb.exec("true")
        after_many = reading(pid)
        many.close()
        one.close()
    return {"one": delta(base, after_one, 1), "fork": delta(after_one, after_many, forks)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arbor", default=str(REPO / "target" / "release" / "arbor"))
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--forks", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "target" / "arbor-bench"))
    args = ap.parse_args()
    if not os.access(args.arbor, os.X_OK):
        raise SystemExit(f"no arbor binary at {args.arbor}: build it with cargo build --release -p arbor")
    runs = []
    for _ in tqdm(range(args.repeat), desc="memory runs", unit="run"):
        with tempfile.TemporaryDirectory(prefix="arbor-memory-") as work:
            runs.append(one_run(args.arbor, Path(work), args.files, args.forks))
    keys = ("processes", "pss_mib", "rss_mib", "kernel_mib", "available_drop_mib")
    result = {
        what: {k: statistics.median(r[what][k] for r in runs) for k in keys} for what in ("one", "fork")
    }
    result["runs"] = runs
    result["forks"] = args.forks
    result["files"] = args.files
    result["load"] = os.getloadavg()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory.json").write_text(json.dumps(result, indent=2) + "\n")
    rows = [
        ("one idle sandbox (after `true`)", result["one"]),
        (f"each of {args.forks} idle forks (after `true` in each)", result["fork"]),
    ]
    md = [
        "# Memory per sandbox",
        "",
        f"`python benches/memory.py` (`make bench-memory`), release binary, {args.files}-file workspace, "
        f"median of {args.repeat} runs on fresh servers; load average at the end "
        f"{' '.join(f'{x:.2f}' for x in result['load'])}. Marginal figures: the difference between "
        "readings before and after, divided by the sandboxes added. Kernel memory is machine-wide "
        "(`Slab + KernelStack + PageTables`); `MemAvailable` drop counts everything, page cache included.",
        "",
        "| what | processes | PSS | RSS | kernel memory | MemAvailable drop |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows:
        md.append(
            f"| {name} | {r['processes']:.1f} | {r['pss_mib']:.2f} MiB | {r['rss_mib']:.2f} MiB | "
            f"{r['kernel_mib']:.2f} MiB | {r['available_drop_mib']:.2f} MiB |"
        )
    (out / "memory.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
