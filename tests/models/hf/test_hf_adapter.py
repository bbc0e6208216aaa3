"""The hf: adapter on a real transformers Llama (random weights, tokenizer trained in the test)."""

from __future__ import annotations

import json

from tiny_needle import tiny_needle  # tests/ is on sys.path
from transformers import AutoTokenizer

from longctx_eval.capability import Capability
from longctx_eval.cli import main
from longctx_eval.hashing import sha256_json
from longctx_eval.models.base import portable_identity
from longctx_eval.models.loader import load_model
from longctx_eval.models.model_files import model_files
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request


def _load(raw: str):
    return load_model(parse_spec(raw))


def test_adapter_records_metadata_and_measures_exact_prompt(tiny_llama_dir):
    model = _load(f"hf:{tiny_llama_dir}?max_length=400")
    assert Capability.GENERATE in model.capabilities
    meta = model.meta
    assert meta.kind == "hf" and meta.params and meta.params > 10_000 and len(meta.sha256) == 64
    assert meta.context_window == 400 and meta.dtype == "float32"
    assert meta.capabilities == ["attention", "generate", "loglikelihood"] and meta.identity_sha256 == sha256_json(
        portable_identity(meta)
    )
    assert model.identity == {
        "name": tiny_llama_dir.name,
        "spec": f"hf:{tiny_llama_dir}?max_length=400",
        "revision": meta.revision,
        "sha256": meta.sha256,
        "decoding": "greedy",
        "chat": False,
        "model_files": model_files(tiny_llama_dir).identity,  # config, generation config, tokenizer: by content
    }
    assert sorted(meta.settings["model_files"]) == [
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    req = Request("s1", "The quick brown fox jumps over the lazy dog. " * 5, "", "q", max_new_tokens=8)
    n = model.prompt_tokens(req)
    assert n == len(AutoTokenizer.from_pretrained(tiny_llama_dir)(req.prompt)["input_ids"])
    pred = model.generate([req])[0]
    assert pred.status == "ok" and pred.prompt_tokens == n
    assert pred.completion_tokens is not None and pred.completion_tokens <= 8
    assert isinstance(pred.text, str)


def test_over_long_prompts_are_reported_not_truncated(tmp_path, tiny_llama_dir, capsys):
    out = tmp_path / "r"
    args = ["run", "--model", f"hf:{tiny_llama_dir}", *tiny_needle("256,1024"), "--limit", "2"]
    assert main([*args, "--out", str(out)]) == 0
    run_dir = out / tiny_llama_dir.name
    preds = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]
    by_len = {n: [p for p in preds if p["target_tokens"] == n] for n in (256, 1024)}
    assert all(p["status"] == "ok" and 256 < p["prompt_tokens"] <= 512 for p in by_len[256])
    for p in by_len[1024]:
        assert p["status"] == "over_length" and p["text"] is None
        assert p["prompt_tokens"] > 1024  # the whole prompt was measured, nothing was cut
        assert "> context window 512" in p["error"]
    run = json.loads((run_dir / "run.json").read_text())
    task = run["tasks"][0]
    assert task["over_length"] == 2 and task["n_samples"] == 4
    cells = {(c["length"], c["evaluated"], c["over_length"]) for c in task["coverage"] if c["depth"] is None}
    assert cells == {(256, 2, 0), (1024, 0, 2)}  # 1024 is "n/a (over window)", not a score of 0
    assert task["pooled_lengths"] == [256]
    assert not [r for r in task["results"] if r["metric"] == "score" and r["length"] == 1024]
    assert run["model"]["context_window"] == 512 and run["model"]["params"] > 0


PROMPTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Read the following text and answer the question after it. " * 6,
    "A short one.",
    "Lorem ipsum " * 20,
    "What is the special magic number? It is 4821.",
]


def _texts(model, prompts, batch_size: int, max_new_tokens: int = 12) -> list[tuple[str, int]]:
    model.batch_size = batch_size
    reqs = [Request(f"s{i}", p, "", "q", max_new_tokens=max_new_tokens - i) for i, p in enumerate(prompts)]
    preds = model.serve("generate", reqs)
    assert [p.prompt_tokens for p in preds] == [model.prompt_tokens(r) for r in reqs]
    return [(p.text, p.completion_tokens) for p in preds]


def test_batched_generation_is_the_same_greedy_text_as_one_by_one(tiny_llama_dir):
    model = _load(f"hf:{tiny_llama_dir}")
    single = _texts(model, PROMPTS, 1)
    assert _texts(model, PROMPTS, 2) == single
    assert _texts(model, PROMPTS, 4) == single
    assert _texts(model, PROMPTS, 8) == single


def test_smollm2_batch_of_two_matches_one_by_one():
    model = _load("smollm2-135m")
    prompts = ["What is the capital of France? Answer in one word.", "Name a colour of the sky on a clear day."]
    single = _texts(model, prompts, 1, max_new_tokens=16)
    assert _texts(model, prompts, 2, max_new_tokens=16) == single
    assert all(text for text, _ in single)


def test_identity_hash_names_the_weights_not_the_install_path(tmp_path, tiny_llama_dir):
    """The same weights in two folders (another clone, another machine) are one model for the leaderboard."""
    import shutil

    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    copy = tmp_path / "elsewhere" / tiny_llama_dir.name
    shutil.copytree(tiny_llama_dir, copy)
    a, b = (load_model(parse_spec(f"hf:{d}")) for d in (tiny_llama_dir, copy))
    assert a.identity != b.identity  # prediction keys keep the folder (existing predictions files resume)
    assert a.meta.identity_sha256 == b.meta.identity_sha256
    c = load_model(parse_spec(f"hf:{copy}?max_length=256"))  # another window: other results, another model
    assert c.meta.identity_sha256 != a.meta.identity_sha256
