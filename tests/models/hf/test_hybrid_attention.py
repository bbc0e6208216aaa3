"""Hybrid attention (sliding-window and global layers) in `hf:`: the layout in the run file and on the board (per
layer type its count, window and RoPE base, and which values the model's files left to transformers' defaults), and
prefix-cache reuse through sliding layers; on a tiny random Gemma 3 and a tiny Llama (full attention), each a real
transformers model built here with SmolLM2's tokenizer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from longctx_eval.cli import main
from longctx_eval.leaderboard.model_facts import context_window_text
from longctx_eval.models.attention_layout import attention_layout, layout_defaulted, source_defaulted
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec
from longctx_eval.results import read_run
from longctx_eval.sample import Request

TYPES = ["sliding_attention"] * 2 + ["full_attention"] + ["sliding_attention"] * 2 + ["full_attention"]
GGUF_LIKE = {"model_type": "gemma3_text", "num_hidden_layers": 6, "rope_theta": 1e6, "sliding_window": 64}
"""The config fields a Gemma 3 GGUF holds (gemma3.rope.freq_base, gemma3.attention.sliding_window): no layer
pattern and no RoPE base for the sliding layers."""


def _gemma_config(**extra):
    from transformers import Gemma3TextConfig

    return Gemma3TextConfig(
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        sliding_window=64,
        max_position_embeddings=4096,
        query_pre_attn_scalar=8,
        **extra,
    )


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """kind -> a saved random-weight model folder (gemma3 or llama) with SmolLM2's tokenizer, no chat template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    from longctx_eval.models.assets import smollm2_dir

    smol = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(str(smol))
    ids = {"vocab_size": len(tok), "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    root = tmp_path_factory.mktemp("layouts")
    built = {}

    def build(kind: str) -> Path:
        if kind not in built:
            folder = root / f"tiny-{kind}"
            folder.mkdir()
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(smol / name, folder / name)
            torch.manual_seed(0)
            if kind == "gemma3":
                cfg = _gemma_config(layer_types=TYPES, pad_token_id=tok.eos_token_id, **ids)
            else:
                cfg = LlamaConfig(
                    hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                    max_position_embeddings=4096, **ids,
                )  # fmt: skip
            AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
            built[kind] = folder
        return built[kind]

    return build


def test_layout_of_a_hybrid_config():
    layout = attention_layout(_gemma_config(layer_types=TYPES), defaulted=[])
    assert layout == {
        "layers": 6,
        "types": {
            "sliding_attention": {"count": 4, "window": 64, "rope_theta": 10000.0},
            "full_attention": {"count": 2, "window": None, "rope_theta": 1000000.0},
        },
        "global_layers": [2, 5],
        "defaulted": [],
    }


def test_values_a_gguf_does_not_hold_are_named_as_defaults():
    from transformers import LlamaConfig

    cfg = _gemma_config()  # transformers' Gemma 3 defaults fill the pattern (5 sliding, then 1 global)
    assert layout_defaulted(cfg, GGUF_LIKE) == ["layer_types", "rope_parameters.sliding_attention.rope_theta"]
    stated = {**GGUF_LIKE, "layer_types": TYPES, "rope_local_base_freq": 1e4}
    assert layout_defaulted(cfg, stated) == []
    assert layout_defaulted(cfg, {"num_hidden_layers": 6}) == [
        "layer_types",
        "sliding_window",
        "rope_parameters.sliding_attention.rope_theta",
        "rope_parameters.full_attention.rope_theta",
    ]
    llama = LlamaConfig(num_hidden_layers=2)
    assert layout_defaulted(llama, {"rope_theta": 1e4}) == [] and layout_defaulted(llama, {}) == ["rope_theta"]


def test_a_folder_says_what_its_config_json_leaves_out(tiny_folder, tmp_path):
    from transformers import AutoConfig

    folder = tiny_folder("gemma3")
    cfg = AutoConfig.from_pretrained(folder)
    assert source_defaulted(cfg, folder) == []  # save_pretrained wrote every value
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    raw = json.loads((copy / "config.json").read_text())
    for key in ("layer_types", "_sliding_window_pattern", "sliding_window_pattern", "rope_parameters"):
        raw.pop(key, None)
    (copy / "config.json").write_text(json.dumps(raw))
    assert source_defaulted(AutoConfig.from_pretrained(copy), copy) == [
        "layer_types",
        "rope_parameters.sliding_attention.rope_theta",
        "rope_parameters.full_attention.rope_theta",
    ]
    (copy / "longctx_source.json").write_text(json.dumps({"gguf_sha256": "0" * 64, "config_defaulted": ["x"]}))
    assert source_defaulted(cfg, copy) == ["x"]  # a converted folder: what its GGUF lacked, recorded at conversion
    assert source_defaulted(cfg, "org/not-a-folder") is None


def test_run_file_and_board_show_sliding_and_full_attention(tiny_folder, tmp_path):
    lines = {}
    for kind in ("gemma3", "llama"):
        folder = tiny_folder(kind)
        args = ["run", "--model", f"hf:{folder}", "--tasks", "needle", "--lengths", "512", "--limit", "1"]
        assert main([*args, "--task-arg", "needle.reserve=0", "--out", str(tmp_path)]) == 0
        model = read_run(tmp_path / folder.name / "run.json").model
        lines[kind] = (model.runtime["attention"], context_window_text(model))
    layout, text = lines["gemma3"]
    assert layout["types"]["sliding_attention"] == {"count": 4, "window": 64, "rope_theta": 10000.0}
    assert layout["global_layers"] == [2, 5] and layout["defaulted"] == []
    assert text == "4,096 tokens, sliding 64 in 4/6 layers (the config's max_position_embeddings)"
    layout, text = lines["llama"]
    assert layout["types"] == {"full_attention": {"count": 2, "window": None, "rope_theta": 10000.0}}
    assert text == "4,096 tokens, full attention (the config's max_position_embeddings)"


def _ask(doc: str, question: str, sid: str) -> Request:
    prompt = f"Read the text and answer the question after it.\n\n{doc}\n\nQuestion: {question}"
    return Request(sid, prompt, doc, question, max_new_tokens=12)


def test_sliding_layers_reuse_a_shared_prefix_with_the_same_text(tiny_folder):
    """Window 64, prompts of ~400 tokens: the second and third questions on one document reuse its prefix (the
    sliding layers cut back to it), and so does a prompt sharing only the first half, cut back further (the layers
    keep their past through a cut: models/hf/growing_cache.py); texts equal those without reuse. With transformers'
    own layers (one window kept before a cut) that shorter prefix is refused with its reason."""
    from data_builders import get_source

    folder = tiny_folder("gemma3")
    on = load_model(parse_spec(f"hf:{folder}"))
    off = load_model(parse_spec(f"hf:{folder}?prefix_cache=false"))
    assert on.meta.runtime["prefix_cache"]["reuse"] is True and "sliding_layers" in on.meta.runtime["prefix_cache"]
    paragraphs = get_source("synthetic").paragraphs(seed=1)
    doc = "\n\n".join(next(paragraphs) for _ in range(6))
    assert on.tokenizer.count(doc) > 300
    requests = [_ask(doc, q, f"q{i}") for i, q in enumerate(("What?", "Where is it?", "Who is there?"))]
    other = _ask(doc[: len(doc) // 2], "What?", "half")  # shares only the first half: before the cut
    got = [on.generate([r])[0] for r in [*requests, other]]
    want = [off.generate([r])[0] for r in [*requests, other]]
    assert [(p.text, p.completion_tokens) for p in got] == [(p.text, p.completion_tokens) for p in want]
    cached = [p.data["cached_tokens"] for p in got]
    assert cached[0] == 0 and cached[1] > 300 and cached[2] == cached[1] and 64 < cached[3] < cached[1]
    assert on.prefix_cache.stats.reused == 3 and not any(p.data.get("prefix_cache_refused") for p in got)
    on.prefix_cache.grow_in_place = False  # transformers' layers: a cut keeps one window before it
    on.prefix_cache.clear()
    plain = [on.generate([r])[0] for r in [*requests[:2], other]]
    assert [p.text for p in plain] == [p.text for p in want[:2]] + [want[3].text]
    assert plain[1].data["cached_tokens"] == cached[1] and plain[2].data["cached_tokens"] == 0
    assert "reaches back to token" in plain[2].data["prefix_cache_refused"]
