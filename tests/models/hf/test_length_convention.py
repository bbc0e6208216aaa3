"""One meaning of length for every task that generates: L is the whole prompt budget in the evaluated model's
tokenizer. For every sample, the prompt as the hf adapter renders it (SmolLM2's real chat template; MiniLM,
which has none, as plain text) plus the generation budget is at most L, the context is exactly
`context_tokens` (= L - reserve) tokens, and `target_tokens` is L; and a real SmolLM2 fits its 8K needle cells
in its 8192-token window (a dry check: nothing is generated at 8K)."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from data_builders.haystack.prompt_budget import MIN_CONTEXT_TOKENS, PROMPT_RESERVE, context_tokens
from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError
from longctx_eval.models.assets import load_tokenizer, minilm_path, smollm2_dir
from longctx_eval.models.hf.adapter import render_ids

GENERATION_TASKS = ("needle", "needle_multikey", "needle_multivalue", "needle_multiquery", "needle_lowlex")
FAST = {"depths": 2, "per_length": 3}  # a few samples per length, every value kind of the per-length variants
TOKENIZERS = {"smollm2-135m": (smollm2_dir, True), "minilm": (minilm_path, False)}


@pytest.fixture(scope="module")
def tokenizers():
    """name -> (the suite's Tokenizer, the transformers tokenizer the hf adapter renders with, chat or not)."""
    out = {}
    for name, (folder, chat) in TOKENIZERS.items():
        hf_tok = AutoTokenizer.from_pretrained(str(folder()))
        assert bool(getattr(hf_tok, "chat_template", None)) == chat  # SmolLM2 has a chat template, MiniLM none
        out[name] = (load_tokenizer(name), hf_tok, chat)
    return out


def _args(name: str, **extra) -> dict:
    info = discover().get(name)
    return {k: v for k, v in {**FAST, **extra}.items() if k in info.arguments}


def _check(name: str, length: int, tok, hf_tok, chat: bool, args: dict) -> int:
    """Build `name` at `length`, check every sample's budget; return the number of requests checked."""
    task = discover().get(name).build({**args, "source": "synthetic"}, lengths=[length], seed=0, tokenizer=tok)
    reserve = task_reserve(name, args)
    checked = 0
    for sample in task.samples():
        meta = sample.metadata
        assert meta["target_tokens"] == length and sample.id.startswith(f"L{length}-")
        assert meta["context_tokens"] == tok.count(sample.context) == length - reserve
        requests = task.prompt(sample)
        for request in requests if isinstance(requests, list) else [requests]:
            rendered = len(render_ids(hf_tok, chat, request))
            assert rendered + request.max_new_tokens <= length, (name, sample.id, rendered, request.max_new_tokens)
            checked += 1
    return checked


def task_reserve(name: str, args: dict) -> int:
    """The reserve a task is built with: the given argument or the task's default."""
    return args.get("reserve", discover().get(name).arguments["reserve"])


@pytest.mark.parametrize("tok_name", list(TOKENIZERS))
@pytest.mark.parametrize("name", GENERATION_TASKS)
def test_prompt_and_budget_fit_the_length_at_1k_and_2k(tokenizers, tok_name, name):
    tok, hf_tok, chat = tokenizers[tok_name]
    for length in (1024, 2048):
        assert _check(name, length, tok, hf_tok, chat, _args(name)) >= 2


@pytest.mark.parametrize("tok_name", list(TOKENIZERS))
def test_needle_fits_at_8k_in_both_tokenizers(tokenizers, tok_name):
    tok, hf_tok, chat = tokenizers[tok_name]
    assert _check("needle", 8192, tok, hf_tok, chat, {"depths": 5}) == 5


@pytest.mark.slow
@pytest.mark.parametrize("tok_name", list(TOKENIZERS))
@pytest.mark.parametrize("name", GENERATION_TASKS[1:])
def test_every_variant_fits_at_8k(tokenizers, tok_name, name):
    tok, hf_tok, chat = tokenizers[tok_name]
    assert _check(name, 8192, tok, hf_tok, chat, _args(name)) >= 2


def test_cross_paragraph_keeps_the_same_convention(tokenizers):
    tok, hf_tok, chat = tokenizers["smollm2-135m"]
    task = discover().get("cross_paragraph").build({"hops": "2", "distances": "128"}, lengths=[1024], tokenizer=tok)
    samples = list(task.samples())
    assert samples and all(s.metadata["context_tokens"] == tok.count(s.context) == 1024 - 192 for s in samples)
    assert all(len(render_ids(hf_tok, chat, r := task.prompt(s))) + r.max_new_tokens <= 1024 for s in samples)


def test_a_reserve_leaving_too_little_context_is_a_clear_error(tokenizers):
    assert context_tokens(1024) == 1024 - PROMPT_RESERVE
    with pytest.raises(ConfigError, match=r"length 256: the context would be 64 tokens after the 192-token prompt"):
        context_tokens(256)
    tok = tokenizers["minilm"][0]
    info = discover().get("needle")
    with pytest.raises(ConfigError, match=f"expected a length of at least {PROMPT_RESERVE + MIN_CONTEXT_TOKENS}"):
        list(info.build({}, lengths=[300], tokenizer=tok).samples())
    small = list(info.build({"reserve": 0, "depths": 1}, lengths=[300], tokenizer=tok).samples())
    assert small[0].metadata["context_tokens"] == tok.count(small[0].context) == 300  # reserve 0: the old meaning
    with pytest.raises(ConfigError, match="reserve"):
        info.check_args({"reserve": -1}, "--task-arg")


def test_smollm2_fits_its_8k_needle_cells_in_its_window(tokenizers):
    """Before needle v5 every 8K cell was over_length (8,250-8,277 prompt tokens + the answer budget)."""
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    model = load_model(parse_spec("smollm2-135m"))
    assert model.meta.context_window == 8192
    task = discover().get("needle").build({}, lengths=[8192], tokenizer=tokenizers["smollm2-135m"][0])
    requests = [task.prompt(s) for s in task.samples()]
    assert len(requests) == 5
    for r in requests:
        n = model.prompt_tokens(r)
        assert model.fits(r, n) and 8192 - PROMPT_RESERVE < n < 8192 - r.max_new_tokens + 1


@pytest.mark.slow  # a real SmolLM2 run: about 2 minutes on 2 busy cores
def test_the_run_folder_records_target_context_and_prompt_tokens(tmp_path, tokenizers):
    out = tmp_path / "out"
    argv = ["run", "--model", "smollm2-135m", "--tasks", "needle", "--lengths", "1024", "--limit", "1"]
    assert main([*argv, "--task-arg", "needle.source=synthetic", "--out", str(out)]) == 0
    run_dir = out / "smollm2-135m"
    (sample,) = [json.loads(x) for x in (run_dir / "samples" / "needle.jsonl").read_text().splitlines()]
    assert sample["metadata"]["target_tokens"] == 1024
    assert sample["metadata"]["context_tokens"] == 1024 - PROMPT_RESERVE
    (pred,) = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    tok, hf_tok, chat = tokenizers["smollm2-135m"]
    task = discover().get("needle").build({"source": "synthetic"}, lengths=[1024], tokenizer=tok)
    request = next(task.prompt(s) for s in task.samples() if s.id == sample["id"])
    assert pred["status"] == "ok" and pred["prompt_tokens"] == len(render_ids(hf_tok, chat, request))
    assert pred["prompt_tokens"] + pred["max_new_tokens"] <= 1024
