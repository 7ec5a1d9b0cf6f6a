"""arbor.adapters.trl through TRL 1.16's own GRPOTrainer code path.

A tiny random Qwen2 (built offline, with TRL's bundled Qwen3 chat template over a byte-level
tokenizer) drives the real trainer: its ``environment_factory`` probing, a training step
(the random model makes no tool calls: a no-op episode, reward 0), TRL's tool-call parsing
(``parse_response`` with the schema ``add_response_schema`` set) and its tool loop
(``_tool_call_loop``) on the task's gold actions, and its ``get_reward`` reward function
(reward 1).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import trl
from datasets import Dataset
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from transformers.utils import get_json_schema
from trl.chat_template_utils import parse_response

import arbor
from arbor.adapters.trl import ArborToolEnv

TASK = "py-stats-1"
SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<tool_response>",
    "</tool_response>",
]


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer (every byte a token) with Qwen3's special tokens and TRL's
    bundled Qwen3 chat template, which TRL knows how to parse tool calls of."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    return hf


def tiny_model(tokenizer: PreTrainedTokenizerFast) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1 << 16,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen2ForCausalLM(config)


def gold_tool_call(action: dict[str, Any]) -> dict[str, Any]:
    """A gold task action as the tool call a model would make."""
    if "exec" in action:
        return {"name": "bash", "arguments": {"command": action["exec"]}}
    return {"name": "write_file", "arguments": {"path": action["write"], "content": action["content"]}}


def test_tool_schemas(alice: arbor.Client) -> None:
    env = ArborToolEnv(client=alice)
    schemas = {
        s["function"]["name"]: s["function"] for s in map(get_json_schema, (env.bash, env.read_file, env.write_file))
    }
    assert schemas["bash"]["parameters"] == {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The shell command to run."}},
        "required": ["command"],
    }
    assert set(schemas["write_file"]["parameters"]["required"]) == {"path", "content"}
    assert schemas["read_file"]["parameters"]["required"] == ["path"]
    assert all(s["description"] for s in schemas.values())


def test_episodes_through_grpo_trainer(alice: arbor.Client, tmp_path: Path) -> None:
    tokenizer = tiny_tokenizer()
    rows = [{"prompt": [{"role": "user", "content": "Fix the bug."}], "task": TASK}] * 2
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        max_tool_calling_iterations=1,
    )
    trainer = trl.GRPOTrainer(
        model=tiny_model(tokenizer),
        processing_class=tokenizer,
        args=args,
        train_dataset=Dataset.from_list(rows),
        environment_factory=lambda: ArborToolEnv(client=alice),
    )
    # TRL found exactly the three tools, and took the reward from get_reward.
    assert sorted(t.__name__ for t in trainer._env_tools[None]) == ["bash", "read_file", "write_file"]
    assert trainer.reward_func_names[-1] == "ArborToolEnv"

    # A real training step: the random model calls no tool, each episode is a no-op: reward 0.
    trainer.train()
    envs = trainer.environments
    assert len(envs) == 2 and all(isinstance(e, ArborToolEnv) for e in envs)
    assert trainer.reward_funcs[-1](environments=envs) == [0.0, 0.0]

    # The gold actions as the model's tool calls, parsed and run by TRL's own loop.
    gold = alice.task(TASK).gold
    prompts, prompt_ids, completion_ids, completions = [], [], [], []
    for env, row in zip(envs, rows, strict=True):
        instructions = env.reset(**row)
        assert "numkit" in instructions
        prompt = [{"role": "user", "content": row["prompt"][0]["content"] + instructions}]
        ids = tokenizer.apply_chat_template(
            prompt, tools=trainer._env_tools[None], add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        prompts.append(prompt)
        prompt_ids.append(list(ids))
    assert "write_file" in tokenizer.decode(prompt_ids[0])  # the tool schema reached the prompt
    calls = "".join(f"<tool_call>\n{json.dumps(gold_tool_call(a))}\n</tool_call>" for a in gold)
    for i, text in enumerate([calls + "<|im_end|>", "I give up.<|im_end|>"]):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        completion_ids.append(ids)
        completions.append([parse_response(tokenizer, ids, prefix=prompt_ids[i], tools=trainer._env_tools[None])])
    assert [c["function"]["name"] for c in completions[0][0]["tool_calls"]] == [gold_tool_call(a)["name"] for a in gold]
    assert not completions[1][0].get("tool_calls")
    trainer.max_completion_length = 1 << 15  # room for the gold files in the completion
    trainer._tool_call_loop(prompts, prompt_ids, completion_ids, completions, None, None, {})
    tool_messages = [m for m in completions[0] if m["role"] == "tool"]
    assert [m["name"] for m in tool_messages] == [gold_tool_call(a)["name"] for a in gold]
    assert "[exit 0]" in tool_messages[-1]["content"]
    assert trainer.reward_funcs[-1](environments=envs) == [1.0, 0.0]
    for env in envs:
        env.__exit__(None, None, None)


def test_tools_on_their_own(alice: arbor.Client) -> None:
    with ArborToolEnv(TASK, client=alice, max_output=200) as env:
        assert env.get_reward() == 0.0  # no episode yet
        assert env.bash("ls").startswith("error: no episode")
        env.reset()
        assert env.bash("ls numkit").endswith("[exit 0]")
        assert "def mean" in env.read_file("numkit/central.py")
        assert env.read_file("nope.py").startswith("error:")
        assert env.read_file("../etc/passwd").startswith("error:")
        assert env.bash("head -c 1000 /dev/zero | tr '\\0' y").count("y") < 200
        assert env.write_file("numkit/extra.py", "X = 1\n").startswith("wrote numkit/extra.py")
        assert env.get_reward() == 0.0
    with pytest.raises(ValueError):
        ArborToolEnv(client=alice).reset()
    with pytest.raises(arbor.NotFound):
        ArborToolEnv(client=alice).reset(task="no-such-task")
