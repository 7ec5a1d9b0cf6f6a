"""Arbor's ``openai:`` policy against a real model server, re-scored in-process.

``lm_server.py`` serves a randomly initialised Llama (built here, tokenizer trained on the
bundled tasks' files; no hub downloads) over OpenAI chat-completions with vLLM's token
extensions. Arbor grows a branched tree on a bundled task with ``--policy openai:...``; every
recorded response is then re-scored with the same weights in one forward pass, and must match
what the server sampled: the ids decode to the recorded text, the recorded log-probs equal
``log_softmax(logits / T)`` at the sampled ids within 1e-3, siblings share their prompt ids, and
the tree records the server's model id and revision. The server logs the bodies Arbor sent, so
the requests themselves are checked too (fields, sampling, tools, and that each edge records the
messages and sampling of the request that produced it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
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
MAX_TOKENS = 16


class Served:
    """A running lm_server: its URL and model directory."""

    def __init__(self, url: str, model_dir: Path, process: subprocess.Popen[str], log: Path) -> None:
        self.url = url
        self.model_dir = model_dir
        self.process = process
        self.log = log

    def requests(self) -> list[dict[str, Any]]:
        """The chat-completions bodies the server has received, in order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

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
    log = d / "requests.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(Path(lm_server.__file__)), "--model", str(model_dir), "--port", "0",
         "--log-requests", str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("lm_server: listening on "), line
        yield Served(line.split()[-1], model_dir, proc, log)
    finally:
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


def _key(seed: int, messages: list[dict[str, Any]]) -> str:
    """A request's identity for the server: its seed and messages."""
    return json.dumps([seed, messages], sort_keys=True)


def _rollout(policy: str, out: Path, home: Path, budget: int) -> None:
    """``arbor rollout`` of TASK with ``policy``, two ways every fourth step, into ``out``."""
    run = subprocess.run(
        [server_binary(), "rollout", "--task", TASK, "--policy", policy, "--branch", "uniform:2:4",
         "--budget", str(budget), "--seed", "3", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "ARBOR_HOME": str(home)},
    )
    assert run.returncode == 0, run.stderr


def _strip(resp: dict[str, Any]) -> dict[str, Any]:
    """A response without the fields that differ between identical requests."""
    return {k: v for k, v in resp.items() if k not in {"id", "created"}}


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
    assert len({json.dumps(c["token_ids"]) for c in a["choices"]}) == 3, "three different samples"
    _, b = served.post(body)
    assert _strip(a) == _strip(b), "the same request answers the same, log-probs included"
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
        f"openai:{served.url}?extensions=vllm&temperature={TEMPERATURE}&top_p=1&max_tokens={MAX_TOKENS}"
        f"&concurrency=4&context_tokens=2048#{lm_server.MODEL_NAME}"
    )
    before = len(served.requests())
    _rollout(policy, out, home, 60)
    (tree,) = json.loads(out.read_text())["trees"]
    # What Arbor sent: every field of the request, one request per decision.
    requests = served.requests()[before:]
    assert requests, "arbor asked the server"
    by_key: dict[str, dict[str, Any]] = {}
    for r in requests:
        assert r["model"] == lm_server.MODEL_NAME and r["tool_choice"] == "auto", r
        assert sorted(t["function"]["name"] for t in r["tools"]) == ["bash", "read_file", "submit", "write_file"]
        assert r["logprobs"] is True and r["return_tokens_as_token_ids"] is True and r["return_token_ids"] is True
        assert (r["temperature"], r["top_p"], r["max_tokens"]) == (TEMPERATURE, 1.0, MAX_TOKENS), r
        assert r["n"] in (1, 2) and isinstance(r["seed"], int) and 0 <= r["seed"] < 2**63, r
        assert r["messages"][0]["role"] == "system" and r["messages"][1]["role"] == "user", r["messages"][:2]
        by_key[_key(r["seed"], r["messages"])] = r
    assert any(r["n"] == 2 for r in requests), "branch points ask for both siblings at once"
    tools = requests[0]["tools"]
    with urllib.request.urlopen(served.url + "/models", timeout=30) as r:
        listed = json.load(r)["data"][0]
    assert tree["policy_info"]["model"] == listed["id"] == lm_server.MODEL_NAME
    assert tree["policy_info"]["revision"] == listed["revision"]
    edges = tree["edges"]
    assert len(edges) >= 4, f"a small tree, but a tree: {len(edges)} edges"
    worst = 0.0
    by_source: dict[int, list[list[int]]] = {}
    for e in edges:
        assert e["tokens"] is not None, e
        gen = e["generation"]
        prompt, ids, lps = gen["prompt_ids"], e["tokens"]["ids"], e["tokens"]["log_probs"]
        assert prompt and ids and len(ids) == len(lps)
        assert gen["model"] == lm_server.MODEL_NAME
        assert gen["sampling"]["temperature"] == TEMPERATURE
        # The edge records the messages and sampling of the request that produced it.
        sent = by_key.get(_key(gen["sampling"]["seed"], gen["messages"]))
        assert sent is not None, f"edge {e['id']}: no request with its seed and messages"
        assert {k: sent[k] for k in gen["sampling"]} == gen["sampling"]
        assert tok.decode(ids, skip_special_tokens=True) == gen["text"]
        # Why it stopped agrees with the ids; the edge's log-prob is the reply's.
        if gen["finish_reason"] == "stop":
            assert ids[-1] == tok.convert_tokens_to_ids(lm_server.END)
        else:
            assert gen["finish_reason"] == "length" and len(ids) == MAX_TOKENS, gen["finish_reason"]
        assert e["log_prob"] == pytest.approx(sum(lps), abs=1e-9)
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


def test_a_server_that_answers_one_choice_is_asked_again_with_another_seed(served: Served, tmp_path: Path) -> None:
    engine = lm_server.Engine(served.model_dir)
    server = lm_server.make_server(engine, max_n=1, keep_requests=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        home = tmp_path / "home"
        home.mkdir()
        policy = f"openai:{url}?temperature=1&max_tokens=8&context_tokens=2048#{lm_server.MODEL_NAME}"
        _rollout(policy, tmp_path / "tree.json", home, 16)
    finally:
        server.shutdown()
        server.server_close()
    requests = server.requests or []
    assert any(r["n"] == 2 for r in requests), "the tree branched"
    seen: dict[str, int] = {}
    for r in requests:
        k = _key(r["seed"], r["messages"])
        seen[k] = seen.get(k, 0) + 1
    repeats = [json.loads(k)[0] for k, c in seen.items() if c > 1]
    assert not repeats, f"requests repeated with the same seed and messages (the same sample again): seeds {repeats}"
