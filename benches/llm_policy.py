"""Throughput of a branched rollout with the LLM policy (``openai:``) against a local model server.

Builds the tiny Llama of ``clients/python/tests/lm_server.py`` (random weights, tokenizer trained
on the bundled tasks), serves it on loopback, and grows one branched tree per concurrency level
(``concurrency=C`` requests in flight, ``n = W`` choices per branch-point request) on a bundled
task with the ``arbor`` binary. Per level: decisions/s (edges sampled over the tree's wall time),
environment steps/s (executed actions over wall time), and where the time went: model wait
(``policy_s``, summed over concurrent decisions) against environment work (fork, snapshot,
action and verify seconds, summed over workers), each also as a share of their sum.

The server generates one request at a time (one lock around the model; vLLM would batch
concurrent requests), so concurrency here overlaps model calls with environment work and with
each other's HTTP and template overhead, not model compute.

Writes ``llm-policy.md``, ``llm-policy.json`` and ``llm-policy.svg`` under ``--out``
(default ``target/arbor-bench``). ``make bench-llm`` runs it with the release binary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))

import lm_server  # noqa: E402

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover
    def tqdm(x, **_):  # type: ignore[no-redef]
        return x


def grow(binary: str, url: str, task: str, concurrency: int, budget: int, width: int, max_tokens: int,
         home: Path, out: Path) -> dict:
    policy = (f"openai:{url}?extensions=vllm&temperature=1&max_tokens={max_tokens}"
              f"&concurrency={concurrency}&context_tokens=4096#{lm_server.MODEL_NAME}")
    started = time.perf_counter()
    run = subprocess.run(
        [binary, "rollout", "--task", task, "--policy", policy, "--branch", f"uniform:{width}:2",
         "--budget", str(budget), "--seed", "0", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=3600, env={**os.environ, "ARBOR_HOME": str(home)},
    )
    elapsed = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(f"arbor rollout failed ({run.returncode}): {run.stderr.strip()}")
    (tree,) = json.loads(out.read_text())["trees"]
    st = tree["stats"]
    decisions = sum(e.get("count", 1) for e in tree["edges"])
    tokens = sum(len(e["tokens"]["ids"]) for e in tree["edges"] if e.get("tokens"))
    env_s = st["fork_s"] + st["snapshot_s"] + st["action_s"] + st["verify_s"]
    model_s = st["policy_s"]
    return {
        "concurrency": concurrency,
        "wall_s": st["wall_s"],
        "process_s": elapsed,
        "decisions": decisions,
        "env_steps": tree["budget"]["actions"],
        "response_tokens": tokens,
        "decisions_per_s": decisions / st["wall_s"],
        "env_steps_per_s": tree["budget"]["actions"] / st["wall_s"],
        "model_wait_s": model_s,
        "env_s": env_s,
        "model_share": model_s / (model_s + env_s) if model_s + env_s else 0.0,
    }


def svg(rows: list[dict]) -> str:
    """Two bar groups per concurrency level: decisions/s and env steps/s."""
    w, h, pad = 520, 300, 50
    top = max(max(r["decisions_per_s"], r["env_steps_per_s"]) for r in rows) * 1.15 or 1
    bw = (w - 2 * pad) / (len(rows) * 3)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="monospace" font-size="11">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{pad}" y="20" font-size="13">openai: policy, branched tree, local server</text>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#333"/>']
    for i, r in enumerate(rows):
        x0 = pad + i * 3 * bw + bw / 2
        for j, (key, colour) in enumerate([("decisions_per_s", "#357"), ("env_steps_per_s", "#2a2")]):
            v = r[key]
            bh = (h - 2 * pad) * v / top
            x = x0 + j * bw
            parts.append(f'<rect x="{x:.1f}" y="{h - pad - bh:.1f}" width="{bw * 0.9:.1f}" height="{bh:.1f}" fill="{colour}"/>')
            parts.append(f'<text x="{x:.1f}" y="{h - pad - bh - 4:.1f}">{v:.1f}</text>')
        parts.append(f'<text x="{x0:.1f}" y="{h - pad + 16}">c={r["concurrency"]}</text>')
    parts.append(f'<rect x="{w - 170}" y="30" width="10" height="10" fill="#357"/><text x="{w - 155}" y="39">decisions/s</text>')
    parts.append(f'<rect x="{w - 170}" y="46" width="10" height="10" fill="#2a2"/><text x="{w - 155}" y="55">env steps/s</text>')
    parts.append("</svg>\n")
    return "\n".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arbor", default=str(REPO / "target" / "release" / "arbor"))
    ap.add_argument("--task", default="config-fix-1")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--budget", type=int, default=120)
    ap.add_argument("--width", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--out", type=Path, default=REPO / "target" / "arbor-bench")
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="arbor-llm-bench-") as tmp:
        d = Path(tmp)
        model = lm_server.build_model(d / "model", lm_server.task_texts(REPO / "envs" / "tasks"))
        proc = subprocess.Popen([sys.executable, lm_server.__file__, "--model", str(model), "--port", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            if not line.startswith("lm_server: listening on "):
                raise SystemExit(f"lm_server did not start: {line!r}")
            url = line.split()[-1]
            rows = []
            for c in tqdm(levels, desc="concurrency levels"):
                home = d / f"home-{c}"
                home.mkdir()
                rows.append(grow(args.arbor, url, args.task, c, args.budget, args.width, args.max_tokens,
                                 home, d / f"tree-{c}.json"))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    head = (f"openai: policy on {args.task}, uniform:{args.width}:2, budget {args.budget}, max_tokens "
            f"{args.max_tokens}, tiny Llama on CPU (one request at a time)\n\n")
    table = head + ("| concurrency | decisions | env steps | wall s | decisions/s | env steps/s | model wait s "
                    "(summed) | env s (summed) | model share |\n|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        table += (f"| {r['concurrency']} | {r['decisions']} | {r['env_steps']} | {r['wall_s']:.2f} | "
                  f"{r['decisions_per_s']:.1f} | {r['env_steps_per_s']:.1f} | {r['model_wait_s']:.2f} | "
                  f"{r['env_s']:.2f} | {r['model_share']:.0%} |\n")
    (args.out / "llm-policy.md").write_text(table)
    (args.out / "llm-policy.json").write_text(json.dumps(rows, indent=2) + "\n")
    (args.out / "llm-policy.svg").write_text(svg(rows))
    print(table)
    print(f"wrote {args.out / 'llm-policy.md'}, .json, .svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
