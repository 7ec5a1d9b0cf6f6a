"""The Python quickstart of Arbor's README, run by `make demo`.

Starts a private `arbor serve` (Client.local(), on a throw-away store), imports a
small project, runs its tests in a sandbox, streams a command's output, writes a
file, snapshots, forks the snapshot four ways, changes each fork differently, and
grades a bundled task with its hidden verifier.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import arbor

PROJECT = {
    "calc.py": "def add(a, b):\n    return a - b  # bug\n",
    "test_calc.py": (
        "import unittest\nfrom calc import add\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
        "if __name__ == '__main__':\n    unittest.main()\n"
    ),
}


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="arbor-quickstart-"))
    os.chmod(scratch, 0o755)
    project = scratch / "project"
    project.mkdir()
    for name, text in PROJECT.items():
        (project / name).write_text(text)

    try:
        run(scratch, project)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("done")


def run(scratch: Path, project: Path) -> None:
    """The quickstart proper, on a private server over a store in `scratch`."""
    with arbor.Client.local(home=scratch / "home") as c:
        print(f"server: {c.url}  health: {c.health().status}")
        snap = c.import_dir(project, tag="base")
        print(f"imported {snap.short} tags={snap.tags}")

        with c.sandbox("base") as sb:
            r = sb.exec("python3 -m unittest -q", timeout=60)
            print(f"tests before the fix: exit {r.exit_code} ({r.duration_s * 1000:.0f} ms)")

            t0 = time.monotonic()
            for chunk in sb.exec_stream(["bash", "-c", "for i in 1 2 3; do echo tick $i; sleep 0.2; done"]):
                print(f"  [{time.monotonic() - t0:4.1f}s] {chunk.stream}: {chunk.data.strip()}")

            sb.write("notes.txt", b"hi")
            print(f"read back: {sb.read('notes.txt')!r}; listing: {[e.name for e in sb.listdir('.')]}")

            s1 = sb.snapshot(tag="step1")
            kids = s1.fork(4)
            fixes = ["a + b", "b + a", "a * b", "a - b"]
            for kid, expr in zip(kids, fixes):
                kid.write("calc.py", f"def add(a, b):\n    return {expr}\n".encode())
                r = kid.exec("python3 -m unittest -q")
                print(f"  fork {kid.id}: add = {expr:6} -> tests exit {r.exit_code}")
            for kid in kids:
                kid.close()

        task = c.task("py-stats-1")
        with c.sandbox(task="py-stats-1") as sb:
            for action in task.gold:
                sb.step(action)
            v = sb.verify()
            print(f"task py-stats-1 with its gold actions: reward {v.reward}")


if __name__ == "__main__":
    main()
