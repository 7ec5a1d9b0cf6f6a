"""``arbor credit TREE --format verl|skyrl|verifiers|trl`` read by each trainer's own code.

A branched tree is grown with a ``command:`` agent that answers every decision with token
fields (``prompt_tokens``, ``tokens``, ``token_log_probs``, ``tokenizer``): byte-level ids of the
prompt and of the chosen action. Each export is then loaded with the consuming library's own
data-loading code or documented types, at the pinned version: verl's Parquet through
``datasets`` (what verl's ``RLHFDataset`` reads with), SkyRL's ``GeneratorOutput`` /
``TrajectoryID`` from the pinned ``skyrl`` 0.3.0 wheel, verifiers 0.4.0's ``MessageNode``, and
TRL 1.16's ``rollout_func`` contract and ``pad``. Every format is checked against the JSON-lines
advantage records of the same tree: one sample per edge, prompt and response ids, masks, behaviour
log-probs and per-token advantages.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, server_binary

TASK = "config-fix-1"
SKYRL_WHEEL_DIR = REPO / ".venv" / "wheels"

AGENT = textwrap.dedent(
    r'''
    """A random agent with byte-level token fields (the test's stand-in for an LLM client)."""
    import fcntl, hashlib, json, math, sys

    req = json.load(sys.stdin)
    prompt = req["prompt"].encode()[-256:]
    # Deterministic per state, different across states.
    h = int(hashlib.sha256(req["prompt"].encode() + str(len(req["history"])).encode()).hexdigest(), 16)
    # The k-th ask at this state (paths run concurrently: one counter per state, under a lock), so
    # siblings at a branch point pick different candidates whatever else is in flight.
    counter_file = f"{sys.argv[1]}-{h % 10**12}"
    with open(sys.argv[1] + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            k = int(open(counter_file).read())
        except OSError:
            k = 0
        open(counter_file, "w").write(str(k + 1))
    n = len(req["candidates"])
    i = (h + k) % n
    text = json.dumps(req["candidates"][i]).encode()
    lp = math.log(1.0 / n)
    print(json.dumps({
        "index": i,
        "log_prob": lp,
        "tokens": list(text),
        "token_log_probs": [lp / len(text)] * len(text),
        "prompt_tokens": list(prompt),
        "tokenizer": "bytes",
        "messages": [{"role": "user", "content": req["prompt"]}],
    }))
    '''
)


def run(args: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Grow one tree, export it in every format, and read the records back."""
    binary = server_binary()
    d = tmp_path_factory.mktemp("exports")
    agent = d / "agent.py"
    agent.write_text(AGENT)
    home = d / "home"
    home.mkdir()
    env = {**os.environ, "ARBOR_HOME": str(home)}
    tree = d / "tree.json"
    policy = f"command:{sys.executable} {agent} {d / 'counter'}"
    out = run(
        [binary, "rollout", "--task", TASK, "--policy", policy, "--branch", "uniform:2",
         "--budget", "24", "--seed", "1", "--out", str(tree), "--json"],
        env=env,
    )
    assert out.returncode == 0, out.stderr
    paths = {}
    for fmt, name in [("jsonl", "adv.jsonl"), ("verl", "adv.parquet"), ("skyrl", "skyrl.json"),
                      ("verifiers", "graph.json"), ("trl", "trl.json")]:
        paths[fmt] = d / name
        done = run([binary, "credit", str(tree), "--format", fmt, "--out", str(paths[fmt]), "--json"],
                   env=env)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["export"]["format"] == fmt
        assert report["export"]["bytes"] == paths[fmt].stat().st_size
    records = [json.loads(line) for line in paths["jsonl"].read_text().splitlines()]
    assert len(records) >= 4, "the tree should have several credited edges"
    return {"paths": paths, "records": records, "tree": tree, "binary": binary, "env": env}


def by_edge(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r["edge"]: r for r in records}


def test_records_carry_version_2_fields(exported: dict[str, Any]) -> None:
    records = exported["records"]
    for r in records:
        assert r["schema"] == "arbor.advantage-record/2"
        assert len(r["tree_id"]) == 32
        assert r["context"]["prompt_ids"], r
        assert r["context"]["tokenizer"] == "bytes"
        assert r["token_advantages"] == [r["step_advantage"]] * len(r["tokens"])
        assert math.isclose(r["weight"], r["n"] / r["visits"])
    # Weights at one state sum to 1.
    groups: dict[Any, float] = {}
    for r in records:
        groups[r["parent_edge"]] = groups.get(r["parent_edge"], 0.0) + r["weight"]
    assert all(math.isclose(w, 1.0) for w in groups.values()), groups
    assert any(r["leaf"] is not None for r in records)
    assert any(r["parent_edge"] is None for r in records)


def test_verl_parquet_loads_with_datasets(exported: dict[str, Any]) -> None:
    import datasets
    import torch

    ds = datasets.load_dataset("parquet", data_files=str(exported["paths"]["verl"]), split="train")
    for col in ["uid", "prompt_ids", "response_ids", "response_mask", "old_log_probs",
                "token_level_advantages"]:
        assert col in ds.column_names, ds.column_names
    recs = by_edge(exported["records"])
    assert len(ds) == len(recs)
    for row in ds:
        r = recs[row["edge"]]
        n = len(row["response_ids"])
        assert n == len(row["response_mask"]) == len(row["old_log_probs"]) == len(row["token_level_advantages"])
        assert row["response_ids"] == r["tokens"]
        assert row["prompt_ids"] == r["context"]["prompt_ids"]
        assert set(row["response_mask"]) == {1}
        assert row["old_log_probs"] == pytest.approx(r["token_log_probs"])
        assert row["token_level_advantages"] == pytest.approx([r["step_advantage"]] * n)
    # The batch verl's trainer builds: right-padded responses, mask 0 on padding.
    width = max(len(x) for x in ds["response_ids"])
    responses = torch.zeros(len(ds), width, dtype=torch.long)
    mask = torch.zeros(len(ds), width, dtype=torch.long)
    for i, (ids, m) in enumerate(zip(ds["response_ids"], ds["response_mask"], strict=True)):
        responses[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(m)] = torch.tensor(m)
    assert int(mask.sum()) == sum(len(x) for x in ds["response_ids"])
    # Samples of one uid share their prompt.
    prompts: dict[str, list[int]] = {}
    for row in ds:
        assert prompts.setdefault(row["uid"], row["prompt_ids"]) == row["prompt_ids"]


def skyrl_types() -> tuple[type, type]:
    """``GeneratorOutput`` and ``TrajectoryID`` from the pinned skyrl 0.3.0 wheel's own source.

    Its package ``__init__`` chain needs Python 3.12 and a GPU stack, so the one module that
    defines the types is loaded by path, with the one name it imports (``ConversationType``)
    provided as SkyRL defines it (a list of message dicts).
    """
    import zipfile

    wheels = sorted(SKYRL_WHEEL_DIR.glob("skyrl-0.3.0-*.whl"))
    if not wheels:
        pytest.fail(f"no skyrl 0.3.0 wheel under {SKYRL_WHEEL_DIR} (make prerequisites downloads it)")
    source = zipfile.ZipFile(wheels[0]).read("skyrl/train/generators/base.py").decode()
    stub = types.ModuleType("skyrl.backends.skyrl_train.inference_servers.base")
    stub.ConversationType = list[dict[str, Any]]  # type: ignore[attr-defined]
    for name in ["skyrl", "skyrl.backends", "skyrl.backends.skyrl_train",
                 "skyrl.backends.skyrl_train.inference_servers"]:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["skyrl.backends.skyrl_train.inference_servers.base"] = stub
    module = types.ModuleType("skyrl_generators_base")
    sys.modules["skyrl_generators_base"] = module
    exec(compile(source, "skyrl/train/generators/base.py", "exec"), module.__dict__)  # noqa: S102
    return module.GeneratorOutput, module.TrajectoryID


def test_skyrl_generator_output(exported: dict[str, Any]) -> None:
    generator_output, trajectory_id = skyrl_types()
    out = json.loads(exported["paths"]["skyrl"].read_text())
    hints = typing.get_type_hints(generator_output)
    extra = set(out) - set(hints) - {"arbor"}
    assert not extra, f"keys GeneratorOutput does not define: {extra}"
    for key in ["prompt_token_ids", "response_ids", "rewards", "loss_masks", "rollout_logprobs",
                "trajectory_ids"]:
        assert key in out
    ids = [trajectory_id(**t) for t in out["trajectory_ids"]]
    n = len(out["response_ids"])
    assert len(ids) == len(out["prompt_token_ids"]) == len(out["rewards"]) == len(out["loss_masks"]) == n
    for resp, rew, mask, lp in zip(out["response_ids"], out["rewards"], out["loss_masks"],
                                   out["rollout_logprobs"], strict=True):
        assert len(resp) == len(rew) == len(mask) == len(lp)
        assert set(mask) == {1}
    # Repetitions within an instance are numbered 0, 1, ...
    seen: dict[str, list[int]] = {}
    for t in ids:
        seen.setdefault(t.instance_id, []).append(t.repetition_id)
    assert all(v == list(range(len(v))) for v in seen.values())
    assert any(len(v) > 1 for v in seen.values()), "a branch point has siblings"


def test_verifiers_message_graph(exported: dict[str, Any]) -> None:
    from verifiers.v1.graph import MessageNode

    graph = json.loads(exported["paths"]["verifiers"].read_text())
    assert graph["schema"] == "arbor.verifiers-graph/1"
    recs = exported["records"]
    (g,) = graph["graphs"]
    nodes = [MessageNode.model_validate(n) for n in g["nodes"]]
    sampled = [i for i, n in enumerate(nodes) if n.sampled]
    assert len(sampled) == len(recs)
    for n in nodes:
        assert len(n.mask) == len(n.token_ids)
        assert len(n.logprobs) == sum(n.mask)
        if n.sampled:
            assert n.advantages is not None and len(n.advantages) == sum(n.mask)
        else:
            assert not any(n.mask)

    def path(i: int) -> list[int]:
        parts = []
        while True:
            parts.append(nodes[i].token_ids)
            if nodes[i].parent is None:
                break
            i = nodes[i].parent
        return [t for p in reversed(parts) for t in p]

    wanted = {tuple(r["context"]["prompt_ids"] + r["tokens"]) for r in recs}
    got = {tuple(path(i)) for i in sampled}
    assert got == wanted


def test_trl_rollout_dict(exported: dict[str, Any]) -> None:
    import inspect

    import torch
    from trl.trainer import grpo_trainer
    from trl.trainer.utils import pad

    out = json.loads(exported["paths"]["trl"].read_text())
    src = inspect.getsource(grpo_trainer.GRPOTrainer)
    required = {"prompt_ids", "completion_ids", "logprobs"}
    assert 'required_keys = {"prompt_ids", "completion_ids", "logprobs"}' in src
    assert required <= set(out)
    assert '"env_mask"' in src  # the pinned trainer reads the mask under this key
    completions = [torch.tensor(c) for c in out["completion_ids"]]
    masks = [torch.tensor(m) for m in out["env_mask"]]
    padded = pad(completions, padding_value=0)
    padded_mask = pad(masks, padding_value=0)
    assert padded.shape == padded_mask.shape
    assert int(padded_mask.sum()) == sum(len(c) for c in out["completion_ids"])
    for c, lp, ta in zip(out["completion_ids"], out["logprobs"], out["token_advantages"], strict=True):
        assert len(c) == len(lp) == len(ta)
    assert len(out["advantages"]) == len(out["prompt_ids"])


def test_normalise_state_scales_each_group(exported: dict[str, Any], tmp_path: Path) -> None:
    p = tmp_path / "norm.json"
    done = run([exported["binary"], "credit", str(exported["tree"]), "--format", "trl",
                "--normalise", "state", "--out", str(p)], env=exported["env"])
    assert done.returncode == 0, done.stderr
    out = json.loads(p.read_text())
    groups: dict[str, list[float]] = {}
    for uid, a in zip(out["uids"], out["advantages"], strict=True):
        groups.setdefault(uid, []).append(a)
    raw = json.loads(exported["paths"]["trl"].read_text())
    assert raw["uids"] == out["uids"]
    for uid, values in groups.items():
        if len(values) > 1 and any(abs(v) > 1e-9 for v in values):
            # Scaled by a positive factor: signs kept, spread normalised.
            raws = [a for u, a in zip(raw["uids"], raw["advantages"], strict=True) if u == uid]
            assert all((v > 0) == (r > 0) for v, r in zip(values, raws, strict=True) if abs(r) > 1e-9)


def test_a_tree_without_token_ids_is_refused_by_field(exported: dict[str, Any], tmp_path: Path) -> None:
    tree = tmp_path / "plain.json"
    out = run([exported["binary"], "rollout", "--task", TASK, "--policy", "mixture", "--budget", "10",
               "--out", str(tree)], env=exported["env"])
    assert out.returncode == 0, out.stderr
    for fmt in ["verl", "skyrl", "verifiers", "trl"]:
        dest = tmp_path / f"out.{fmt}"
        refused = run([exported["binary"], "credit", str(tree), "--format", fmt, "--out", str(dest)],
                      env=exported["env"])
        assert refused.returncode == 2, refused.stderr
        assert "`context.prompt_ids`" in refused.stderr and fmt in refused.stderr
        assert not dest.exists()
    # Positive control: the records themselves export.
    ok = run([exported["binary"], "credit", str(tree), "--format", "jsonl", "--out",
              str(tmp_path / "plain.jsonl")], env=exported["env"])
    assert ok.returncode == 0, ok.stderr


if importlib.util.find_spec("verifiers") is None:  # pragma: no cover - pinned in requirements-test.txt
    pytest.skip("verifiers is not installed", allow_module_level=True)
