"""A small, real OpenAI-compatible chat-completions server over a locally built model.

Real servers do not fit the test machine: ``transformers serve`` ignores ``logprobs``, ``n``
and ``tool_choice``, and vLLM's PyPI wheels are CUDA-only. This server samples from an actual
``transformers`` causal LM (a randomly initialised Llama with a byte-level BPE tokenizer trained
locally with ``tokenizers``: no hub downloads) and speaks the subset of the API Arbor's
``openai:`` policy uses, with vLLM's token extensions:

- ``GET /v1/models``: the model's id, ``root`` (its directory) and ``revision`` (a digest of the
  weights);
- ``POST /v1/chat/completions``: ``messages`` and ``tools`` rendered by a fixed chat template,
  ``n`` choices sampled ancestrally with a KV cache, reproducibly from ``seed`` (choice ``i``
  uses a generator seeded with ``(seed, i)``), ``temperature``, ``top_p``, ``max_tokens``,
  ``logprobs`` / ``top_logprobs``, ``return_tokens_as_token_ids`` (tokens as ``token_id:N``)
  and ``return_token_ids`` (``prompt_token_ids`` on the response and ``token_ids`` on each
  choice, as vLLM returns them).

Each reported log-probability is that of the distribution the token was sampled from,
``log_softmax(logits / temperature)``; nucleus truncation (``top_p < 1``) changes what can be
sampled but is not reflected in the reported value (use ``top_p = 1`` to compare exactly), and
``temperature = 0`` samples greedily and reports ``log_softmax(logits)``.
Generation stops at ``<|end|>`` (``finish_reason: stop``; the end token is part of
``token_ids`` and ``logprobs``, as vLLM includes the EOS token) or after ``max_tokens``
(``length``). ``content`` is ``decode(token_ids, skip_special_tokens=True)``. A random model
writes no tool calls: Arbor records its replies as invalid actions, which is the point.

For tests of the client: ``--max-n N`` answers at most ``N`` choices per request, as a server
that ignores ``n`` does (``transformers serve``), and ``--log-requests FILE`` appends every
chat-completions body as it arrived, one JSON object per line.

Run: ``python lm_server.py --model DIR [--host 127.0.0.1] [--port 0] [--build-from DIR]
[--max-n N] [--log-requests FILE]``; prints ``lm_server: listening on http://HOST:PORT/v1`` when
ready.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import inspect
import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402

SPECIALS = ["<|pad|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>"]
END = "<|end|>"
MODEL_NAME = "arbor-tiny-llama"


def task_texts(tasks_dir: Path, limit: int = 400) -> list[str]:
    """Text files of the bundled tasks (instructions, sources, checks) to train the tokenizer on."""
    out = []
    for p in sorted(tasks_dir.rglob("*")):
        if p.is_file() and p.suffix in {".toml", ".md", ".py", ".txt", ".sh", ".json", ".cfg", ".ini"}:
            try:
                out.append(p.read_text()[:20_000])
            except (UnicodeDecodeError, OSError):
                continue
        if len(out) >= limit:
            break
    return out


def build_model(
    out_dir: Path,
    texts: Iterable[str],
    *,
    vocab_size: int = 768,
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 16_384,
) -> Path:
    """Train a byte-level BPE tokenizer on ``texts``, make a random Llama, save both to ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<|pad|>", eos_token=END, bos_token="<|system|>"
    )
    fast.save_pretrained(out_dir)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        pad_token_id=fast.pad_token_id,
        eos_token_id=fast.eos_token_id,
        bos_token_id=fast.bos_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    # Random init at std 0.02 gives near-uniform next-token distributions; a wider one gives
    # the sampler something to prefer, as a trained model would.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)
    model.save_pretrained(out_dir)
    return out_dir


def render(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> str:
    """The chat template: tools, then every message with its role tag, then the assistant tag."""
    parts = []
    if tools:
        parts.append("<|system|>tools: " + json.dumps(tools, sort_keys=True) + END)
    for m in messages:
        role = m.get("role")
        content = m.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content)
        if role == "assistant":
            for call in m.get("tool_calls") or []:
                content += "<tool_call>" + json.dumps(call.get("function", call), sort_keys=True) + "</tool_call>"
        tag = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>", "tool": "<|tool|>"}[role]
        parts.append(tag + content + END)
    parts.append("<|assistant|>")
    return "".join(parts)


class BadRequest(Exception):
    """A request the server refuses (400), with the reason."""


class Engine:
    """The model, its tokenizer and a lock (one generation at a time)."""

    def __init__(self, model_dir: Path) -> None:
        self.dir = Path(model_dir)
        self.tokenizer = PreTrainedTokenizerFast.from_pretrained(self.dir)
        self.model = LlamaForCausalLM.from_pretrained(self.dir, torch_dtype=torch.float32).eval()
        self.end_id = self.tokenizer.convert_tokens_to_ids(END)
        weights = sorted(self.dir.glob("*.safetensors")) or sorted(self.dir.glob("*.bin"))
        digest = hashlib.sha256()
        for w in weights:
            digest.update(w.read_bytes())
        self.revision = digest.hexdigest()[:16]
        self.lock = threading.Lock()
        self.limit = self.model.config.max_position_embeddings
        # transformers 5.25 renamed `past_key_values` to `cache` (the old name warns until 5.40).
        self.cache_kw = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"

    @staticmethod
    def _cache(out: Any) -> Any:
        """The KV cache of a forward pass's output, under either name."""
        cache = getattr(out, "cache", None)
        return cache if cache is not None else out.past_key_values

    def prompt_ids(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> list[int]:
        return self.tokenizer.encode(render(messages, tools), add_special_tokens=False)

    @torch.no_grad()
    def sample(
        self,
        prompt: list[int],
        *,
        n: int,
        seed: int,
        temperature: float,
        top_p: float,
        max_tokens: int,
        top_logprobs: int,
    ) -> list[dict[str, Any]]:
        """``n`` replies to ``prompt``: ids, log-probs, top alternatives and why each stopped."""
        if len(prompt) + max_tokens > self.limit:
            raise BadRequest(f"prompt of {len(prompt)} tokens + max_tokens {max_tokens} exceeds {self.limit}")
        with self.lock:
            first = self.model(input_ids=torch.tensor([prompt]), use_cache=True)
            out = []
            for i in range(n):
                gen = torch.Generator().manual_seed((seed * 1_000_003 + i) % (2**63))
                past = copy.deepcopy(self._cache(first))
                logits = first.logits[0, -1]
                ids: list[int] = []
                lps: list[float] = []
                tops: list[list[tuple[int, float]]] = []
                finish = "length"
                for _ in range(max_tokens):
                    t = temperature if temperature > 0 else 1.0
                    logp = torch.log_softmax(logits.double() / t, dim=-1)
                    if temperature == 0:
                        tok = int(torch.argmax(logp))
                    else:
                        probs = logp.exp()
                        if top_p < 1.0:
                            sorted_p, order = torch.sort(probs, descending=True)
                            keep = torch.cumsum(sorted_p, 0) - sorted_p < top_p
                            mask = torch.zeros_like(probs, dtype=torch.bool)
                            mask[order[keep]] = True
                            probs = torch.where(mask, probs, torch.zeros_like(probs))
                        tok = int(torch.multinomial(probs.float(), 1, generator=gen))
                    ids.append(tok)
                    lps.append(float(logp[tok]))
                    if top_logprobs:
                        v, k = torch.topk(logp, top_logprobs)
                        tops.append([(int(a), float(b)) for a, b in zip(k, v, strict=True)])
                    if tok == self.end_id:
                        finish = "stop"
                        break
                    step = self.model(input_ids=torch.tensor([[tok]]), use_cache=True, **{self.cache_kw: past})
                    past = self._cache(step)
                    logits = step.logits[0, -1]
                out.append({"ids": ids, "logprobs": lps, "tops": tops, "finish": finish})
            return out


def _number(body: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    v = body.get(key, default)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise BadRequest(f"`{key}` = {v!r} is not a number in [{lo}, {hi}]")
    return float(v)


def complete(engine: Engine, body: dict[str, Any], *, max_n: int = 0) -> dict[str, Any]:
    """One chat-completions request (at most ``max_n`` choices when it is positive)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("`messages` must be a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in {"system", "user", "assistant", "tool"}:
            raise BadRequest(f"`messages[{i}]` has no valid role")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("`tools` must be a list")
    n = int(_number(body, "n", 1, 1, 64))
    if max_n > 0:
        n = min(n, max_n)
    max_tokens = int(_number(body, "max_tokens", 64, 1, 4096))
    temperature = _number(body, "temperature", 1.0, 0.0, 10.0)
    top_p = _number(body, "top_p", 1.0, 1e-6, 1.0)
    seed = int(_number(body, "seed", 0, 0, 2**63 - 1))
    want_lp = bool(body.get("logprobs"))
    top_lp = int(_number(body, "top_logprobs", 0, 0, 20)) if want_lp else 0
    as_ids = bool(body.get("return_tokens_as_token_ids"))
    prompt = engine.prompt_ids(messages, tools)
    samples = engine.sample(
        prompt, n=n, seed=seed, temperature=temperature, top_p=top_p, max_tokens=max_tokens, top_logprobs=top_lp
    )
    tok = engine.tokenizer

    def name(i: int) -> str:
        return f"token_id:{i}" if as_ids else tok.decode([i])

    choices = []
    for k, s in enumerate(samples):
        choice: dict[str, Any] = {
            "index": k,
            "message": {"role": "assistant", "content": tok.decode(s["ids"], skip_special_tokens=True)},
            "finish_reason": s["finish"],
        }
        if want_lp:
            content = []
            for j, (i, lp) in enumerate(zip(s["ids"], s["logprobs"], strict=True)):
                entry: dict[str, Any] = {"token": name(i), "logprob": lp, "bytes": list(tok.decode([i]).encode())}
                if top_lp:
                    entry["top_logprobs"] = [{"token": name(a), "logprob": b} for a, b in s["tops"][j]]
                content.append(entry)
            choice["logprobs"] = {"content": content}
        if body.get("return_token_ids"):
            choice["token_ids"] = s["ids"]
        choices.append(choice)
    resp: dict[str, Any] = {
        "id": f"chatcmpl-{hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_NAME,
        "choices": choices,
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": sum(len(s["ids"]) for s in samples),
            "total_tokens": len(prompt) + sum(len(s["ids"]) for s in samples),
        },
    }
    if body.get("return_token_ids"):
        resp["prompt_token_ids"] = prompt
    return resp


class Server(ThreadingHTTPServer):
    """The HTTP server, with the chat-completions bodies it received when asked to keep them."""

    daemon_threads = True
    requests: list[dict[str, Any]] | None
    """Every chat-completions body as it arrived (``None``: not kept)."""


def make_server(
    engine: Engine,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_n: int = 0,
    keep_requests: bool = False,
    log_requests: Path | None = None,
) -> Server:
    """The HTTP server (not yet serving).

    ``max_n`` > 0 answers at most that many choices per request; ``keep_requests`` keeps every
    chat-completions body in ``server.requests``; ``log_requests`` appends each to that file as a
    JSON line.
    """
    log_lock = threading.Lock()

    def record(body: dict[str, Any]) -> None:
        with log_lock:
            if server.requests is not None:
                server.requests.append(body)
            if log_requests is not None:
                with open(log_requests, "a") as f:
                    f.write(json.dumps(body) + "\n")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: Any) -> None:  # quiet
            pass

        def reply(self, code: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def error(self, code: int, message: str) -> None:
            self.reply(code, {"error": {"message": message, "type": "invalid_request_error", "code": code}})

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/") == "/v1/models":
                self.reply(200, {"object": "list", "data": [{
                    "id": MODEL_NAME, "object": "model", "owned_by": "arbor-tests",
                    "root": str(engine.dir), "revision": engine.revision,
                }]})
            else:
                self.error(404, f"no route {self.path}")

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self.error(404, f"no route {self.path}")
                return
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise BadRequest("the body must be a JSON object")
                record(body)
                self.reply(200, complete(engine, body, max_n=max_n))
            except json.JSONDecodeError as e:
                self.error(400, f"the body is not JSON: {e}")
            except BadRequest as e:
                self.error(400, str(e))

    server = Server((host, port), Handler)
    server.requests = [] if keep_requests else None
    return server


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="model directory (built with --build-from)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--build-from", type=Path, help="train the tokenizer on these task files and build the model")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--max-n", type=int, default=0, help="at most N choices per request (0: as asked)")
    ap.add_argument("--log-requests", type=Path, help="append every chat-completions body to this file")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.build_from:
        build_model(args.model, task_texts(args.build_from))
    engine = Engine(args.model)
    server = make_server(engine, args.host, args.port, max_n=args.max_n, log_requests=args.log_requests)
    host, port = server.server_address[:2]
    print(f"lm_server: listening on http://{host}:{port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
