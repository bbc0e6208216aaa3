"""Tiny random-weight causal LMs of six architectures, built offline with SmolLM2's real tokenizer, through
`longctx-eval run`: needle and cross_paragraph generate on each; posprobe runs on the architectures the probe
serves and is skipped, once, with its reason, before any request is sent on the others; run.json is always
written.

BLOOM (ALiBi without the AttentionInterface: its refusal used to print twice and count two errors) runs by
default, with a unit test of the refusal on each of the six models; the other five runs are marked slow:
Llama and GPT-NeoX (partial rotary 0.25), whose probe runs, GPT-2 (learned positions: it used to crash the
probe and lose run.json), Qwen2 and Mistral (a sliding window of 256, refused). About 10-20 s each here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from longctx_eval.cli import main

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
TINY = {"hidden": 32, "layers": 2, "heads": 4, "window": 4096}
ARCHS = ("llama", "qwen2", "mistral", "gpt2", "bloom", "gpt_neox")
PROBED = {"llama", "gpt_neox"}
"""Architectures whose posprobe runs; the others are refused before any request."""
REFUSALS = {
    "qwen2": "sliding window of 256 tokens",
    "mistral": "sliding window of 256 tokens",
    "gpt2": "no rotary position embedding (learned absolute positions)",
    "bloom": "does not dispatch attention through transformers' AttentionInterface",
}


def _config(arch: str, vocab: int, bos: int, eos: int):
    """A two-layer config of `arch` with SmolLM2's vocabulary and a 4096-token window."""
    import transformers as tf

    h, n, heads, window = TINY["hidden"], TINY["layers"], TINY["heads"], TINY["window"]
    ids = {"vocab_size": vocab, "bos_token_id": bos, "eos_token_id": eos}
    if arch == "llama":
        return tf.LlamaConfig(
            hidden_size=h,
            intermediate_size=64,
            num_hidden_layers=n,
            num_attention_heads=heads,
            max_position_embeddings=window,
            **ids,
        )
    if arch == "qwen2":
        return tf.Qwen2Config(
            hidden_size=h,
            intermediate_size=64,
            num_hidden_layers=n,
            num_attention_heads=heads,
            num_key_value_heads=2,
            max_position_embeddings=window,
            use_sliding_window=True,
            sliding_window=256,
            max_window_layers=0,
            **ids,
        )
    if arch == "mistral":
        return tf.MistralConfig(
            hidden_size=h,
            intermediate_size=64,
            num_hidden_layers=n,
            num_attention_heads=heads,
            num_key_value_heads=2,
            max_position_embeddings=window,
            sliding_window=256,
            **ids,
        )
    if arch == "gpt2":
        return tf.GPT2Config(n_embd=h, n_layer=n, n_head=heads, n_positions=window, **ids)
    if arch == "bloom":
        return tf.BloomConfig(hidden_size=h, n_layer=n, n_head=heads, **ids)
    if arch == "gpt_neox":
        return tf.GPTNeoXConfig(
            hidden_size=h,
            intermediate_size=64,
            num_hidden_layers=n,
            num_attention_heads=heads,
            max_position_embeddings=window,
            rotary_pct=0.25,
            **ids,
        )
    raise AssertionError(arch)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """arch -> a saved random-weight model folder with SmolLM2's tokenizer (its chat template left out), each
    built on first use (about a second) and kept for the session."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from longctx_eval.models.assets import smollm2_dir

    smol = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(str(smol))
    root = tmp_path_factory.mktemp("tiny-archs")
    built: dict[str, Path] = {}

    def build(arch: str) -> Path:
        if arch not in built:
            folder = root / f"tiny-{arch.replace('_', '')}"
            folder.mkdir()
            for name in TOKENIZER_FILES:
                shutil.copy(smol / name, folder / name)
            torch.manual_seed(0)
            cfg = _config(arch, len(tok), tok.bos_token_id, tok.eos_token_id)
            AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
            built[arch] = folder
        return built[arch]

    return build


def _run(folder: Path, out: Path, tasks: str, *extra: str) -> int:
    args = ["run", "--model", f"hf:{folder}", "--tasks", tasks, "--lengths", "1024", "--limit", "1"]
    return main([*args, "--out", str(out), *extra])


PROBE_ARGS = ("posprobe.text_every=0", "posprobe.needles=5", "posprobe.calibration_needles=4")
"""A small probe: 5 needles per length, 4 calibration needles, no needle-free texts."""


def _check_architecture(arch: str, tiny_model, tmp_path: Path, capsys) -> None:
    folder = tiny_model(arch)
    probe_args = [a for arg in PROBE_ARGS for a in ("--task-arg", arg)]
    rc = _run(folder, tmp_path, "needle,cross_paragraph,posprobe", *probe_args)
    printed = capsys.readouterr().err
    run = json.loads((tmp_path / folder.name / "run.json").read_text())
    tasks = {t["name"]: t for t in run["tasks"]}
    for name in ("needle", "cross_paragraph"):  # every architecture generates
        assert tasks[name]["n_samples"] >= 1 and tasks[name]["errors"] == 0, (arch, name)
        assert tasks[name]["coverage"][0]["evaluated"] >= 1
    skipped = {s["task"]: s for s in run["skipped"]}
    if arch in PROBED:
        assert rc == 0, printed
        assert "posprobe" in tasks and tasks["posprobe"]["errors"] == 0 and "posprobe" not in skipped
    else:
        assert rc == 0, printed  # a stated refusal is a skip, not an error
        assert "posprobe" not in tasks
        assert skipped["posprobe"]["kind"] == "capability"
        assert REFUSALS[arch] in skipped["posprobe"]["reason"]
        assert printed.count(REFUSALS[arch]) == 1  # once, as a skip; never as an error
        assert "error" not in printed.lower().replace("error_rate", "")
        predictions = (tmp_path / folder.name / "predictions.jsonl").read_text().splitlines()
        assert not [p for p in predictions if json.loads(p)["task"] == "posprobe"]  # nothing was sent


@pytest.mark.parametrize("arch", ["bloom"])
def test_tiny_architecture_generates_and_the_probe_is_refused_up_front(arch, tiny_model, tmp_path, capsys):
    _check_architecture(arch, tiny_model, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "gpt_neox", "gpt2", "qwen2", "mistral"])
def test_tiny_architecture_runs_or_refuses_the_probe_slow(arch, tiny_model, tmp_path, capsys):
    _check_architecture(arch, tiny_model, tmp_path, capsys)


@pytest.mark.parametrize("arch", ARCHS)
def test_probe_refusal_reads_the_architecture_from_the_model(arch):
    from transformers import AutoModelForCausalLM

    from longctx_eval.models.posprobe.support import probe_refusal

    model = AutoModelForCausalLM.from_config(_config(arch, 64, 1, 2))
    refusal = probe_refusal(model)
    assert (refusal is None) == (arch in PROBED), refusal
    if refusal is not None:
        assert REFUSALS[arch] in refusal and type(model).__name__ in refusal


def test_a_sliding_window_that_no_layer_uses_is_not_refused():
    import transformers as tf
    from transformers import AutoModelForCausalLM

    from longctx_eval.models.posprobe.support import probe_refusal

    qwen = tf.Qwen2Config(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
        use_sliding_window=False,
        sliding_window=256,
    )
    mistral = tf.MistralConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
        sliding_window=None,
    )
    for cfg in (qwen, mistral):
        assert probe_refusal(AutoModelForCausalLM.from_config(cfg)) is None
