"""Arbor's ``openai:`` policy against a real model server, re-scored in-process.

``lm_server.py`` serves a randomly initialised Llama (built here, tokenizer trained on the
bundled tasks' files; no hub downloads) over OpenAI chat-completions with vLLM's token
extensions. Arbor grows a branched tree on a bundled task with ``--policy openai:...``; every
recorded response is then re-scored with the same weights in one forward pass, and must match
what the server sampled: the ids decode to the recorded text, the recorded log-probs equal
``log_softmax(logits / T)`` at the sampled ids within 1e-3, siblings share their prompt ids, and
the tree records the server's model id and revision.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, server_binary

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).parent))
import lm_server  # noqa: E402

TASK = "config-fix-1"
TEMPERATURE = 1.0


class Served:
    """A running lm_server: its URL and model directory."""

    def __init__(self, url: str, model_dir: Path, process: subprocess.Popen[str]) -> None:
        self.url = url
        self.model_dir = model_dir
        self.process = process

    def post(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(
            self.url + "/chat/completions", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    d = tmp_path_factory.mktemp("lm")
    model_dir = lm_server.build_model(d / "model", lm_server.task_texts(REPO / "envs" / "tasks"))
    proc = subprocess.Popen(
        [sys.executable, str(Path(lm_server.__file__)), "--model", str(model_dir), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("lm_server: listening on "), line
    yield Served(line.split()[-1], model_dir, proc)
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def scorer(served: Served) -> tuple[Any, Any]:
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(served.model_dir)
    model = LlamaForCausalLM.from_pretrained(served.model_dir, torch_dtype=torch.float32).eval()
    return tok, model


def rescore(model: Any, prompt: list[int], ids: list[int], temperature: float) -> list[float]:
    """log_softmax(logits / T) at each response id, from one forward pass over prompt + response."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids])).logits[0].double()
    logp = torch.log_softmax(logits[len(prompt) - 1 : len(prompt) + len(ids) - 1] / temperature, dim=-1)
    return logp[torch.arange(len(ids)), torch.tensor(ids)].tolist()


def test_the_server_samples_reproducibly_and_refuses_bad_requests(served: Served) -> None:
    body = {
        "messages": [{"role": "user", "content": "fix the config"}],
        "n": 3, "seed": 11, "max_tokens": 12, "logprobs": True, "top_logprobs": 2,
        "return_tokens_as_token_ids": True, "return_token_ids": True,
    }
    code, a = served.post(body)
    assert code == 200, a
    assert len(a["choices"]) == 3
    for c in a["choices"]:
        assert len(c["logprobs"]["content"]) == len(c["token_ids"])
        assert [int(t["token"].split(":")[1]) for t in c["logprobs"]["content"]] == c["token_ids"]
        assert all(len(t["top_logprobs"]) == 2 for t in c["logprobs"]["content"])
    assert a["prompt_token_ids"]
    _, b = served.post(body)
    assert [c["token_ids"] for c in a["choices"]] == [c["token_ids"] for c in b["choices"]]
    # Positive control for reproducibility: another seed samples something else.
    _, other = served.post({**body, "seed": 12})
    assert [c["token_ids"] for c in other["choices"]] != [c["token_ids"] for c in a["choices"]]
    for bad in [{**body, "n": 0}, {**body, "messages": []}, {**body, "temperature": "hot"}]:
        code, err = served.post(bad)
        assert code == 400 and err["error"]["message"], err


def test_a_branched_tree_records_exactly_what_the_model_sampled(
    served: Served, scorer: tuple[Any, Any], tmp_path: Path
) -> None:
    tok, model = scorer
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "tree.json"
    policy = (
        f"openai:{served.url}?extensions=vllm&temperature={TEMPERATURE}&top_p=1&max_tokens=16"
        f"&concurrency=4&context_tokens=2048#{lm_server.MODEL_NAME}"
    )
    run = subprocess.run(
        [server_binary(), "rollout", "--task", TASK, "--policy", policy, "--branch", "uniform:2:4",
         "--budget", "60", "--seed", "3", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "ARBOR_HOME": str(home)},
    )
    assert run.returncode == 0, run.stderr
    (tree,) = json.loads(out.read_text())["trees"]
    with urllib.request.urlopen(served.url + "/models", timeout=30) as r:
        listed = json.load(r)["data"][0]
    assert tree["policy_info"]["model"] == listed["id"] == lm_server.MODEL_NAME
    assert tree["policy_info"]["revision"] == listed["revision"]
    edges = tree["edges"]
    assert len(edges) >= 4, f"a small tree, but a tree: {len(edges)} edges"
    tools = _tools_from_prompt(served, edges[0]["generation"])
    worst = 0.0
    by_source: dict[int, list[list[int]]] = {}
    for e in edges:
        assert e["tokens"] is not None, e
        gen = e["generation"]
        prompt, ids, lps = gen["prompt_ids"], e["tokens"]["ids"], e["tokens"]["log_probs"]
        assert prompt and ids and len(ids) == len(lps)
        assert gen["model"] == lm_server.MODEL_NAME
        assert gen["sampling"]["temperature"] == TEMPERATURE
        assert tok.decode(ids, skip_special_tokens=True) == gen["text"]
        # The prompt is the template over the recorded messages.
        assert prompt == tok.encode(lm_server.render(gen["messages"], tools), add_special_tokens=False)
        got = rescore(model, prompt, ids, TEMPERATURE)
        worst = max(worst, max(abs(a - b) for a, b in zip(got, lps, strict=True)))
        by_source.setdefault(e["from"], []).append(prompt)
    assert worst < 1e-3, f"recorded log-probs differ from the model's by {worst}"
    branch_points = [p for p in by_source.values() if len(p) > 1]
    assert branch_points, "the tree branched"
    for prompts in branch_points:
        assert all(p == prompts[0] for p in prompts), "siblings share their prompt"
    # The tree exports for verl as it stands (prompt ids and tokens are all there).
    parquet = tmp_path / "adv.parquet"
    export = subprocess.run(
        [server_binary(), "credit", str(out), "--format", "verl", "--out", str(parquet), "--json"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "ARBOR_HOME": str(home)},
    )
    assert export.returncode == 0, export.stderr
    assert json.loads(export.stdout)["export"]["rows"] >= 1
    # Positive control: the same check catches a wrong temperature and a wrong token.
    e = edges[0]
    prompt, ids, lps = e["generation"]["prompt_ids"], e["tokens"]["ids"], e["tokens"]["log_probs"]
    off = rescore(model, prompt, ids, TEMPERATURE * 0.5)
    assert max(abs(a - b) for a, b in zip(off, lps, strict=True)) > 1e-3
    swapped = [ids[0] + 1 if ids[0] + 1 < len(tok) else ids[0] - 1, *ids[1:]]
    off = rescore(model, prompt, swapped, TEMPERATURE)
    assert abs(off[0] - lps[0]) > 1e-3


def _tools_from_prompt(served: Served, gen: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool list Arbor sent, read back from the rendered prompt's first segment."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(served.model_dir)
    text = tok.decode(gen["prompt_ids"])
    head = text.split(lm_server.END, 1)[0]
    assert head.startswith("<|system|>tools: "), head[:80]
    tools = json.loads(head[len("<|system|>tools: ") :])
    assert sorted(t["function"]["name"] for t in tools) == ["bash", "read_file", "submit", "write_file"]
    return tools
