"""The references' training recipe and the learned-position reference, on real batches and real weights.

Training data: varied lengths (no absolute-position cue), uniform needle depth, padding invisible to the
sequence. Training: a short schedule interrupted and resumed from its checkpoint equals, bit for bit, an
uninterrupted run from the same seed. tiny-learned: the table is attached on load, positions past it are clamped and
the clamp is reported, cached generation equals a full forward, RoPE variants are refused.
"""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest
import torch

from data_builders.posprobe.language import ToyCodec, ToyLanguage, build_passkey
from data_builders.posprobe.training import MIN_LENGTH, training_batch
from longctx_eval.errors import ConfigError
from longctx_eval.models.posprobe import learned_position as lp
from longctx_eval.models.references import REFERENCE_ROOT

WINDOW = 128


def _train_module():
    """reference_models/train.py as a module (it is a script, not a package), loaded once."""
    if "reference_train" not in sys.modules:
        spec = importlib.util.spec_from_file_location("reference_train", REFERENCE_ROOT / "train.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["reference_train"] = module
        spec.loader.exec_module(module)
    return sys.modules["reference_train"]


@pytest.fixture(scope="module")
def batches():
    rng, codec, lang = np.random.default_rng(3), ToyCodec(), ToyLanguage()
    return [training_batch(rng, codec, lang, 32, WINDOW, 0.8, 10.0) for _ in range(25)]


def test_training_lengths_vary_over_the_window_and_depths_are_uniform(batches):
    codec = ToyCodec()
    lengths = [n for b in batches for n, d in zip(b.lengths, b.depths, strict=True) if d is not None]
    depths = [d for b in batches for d in b.depths if d is not None]
    questions = [q for b in batches for q in b.question_positions if q is not None]
    plain = sum(d is None for b in batches for d in b.depths)
    assert 0.15 < plain / (25 * 32) < 0.25  # the 20% plain filler stays
    assert min(lengths) >= MIN_LENGTH and max(lengths) <= WINDOW
    assert len(set(lengths)) > 80  # ~97 possible lengths, 640 draws
    counts, _ = np.histogram(lengths, bins=4, range=(MIN_LENGTH, WINDOW + 1))
    assert counts.min() > 0.6 * counts.mean()  # uniform over the window, not piled at 128
    assert np.histogram(depths, bins=5, range=(0, 1))[0].min() > 0.6 * len(depths) / 5
    assert min(questions) < 40 and max(questions) > 110  # the question is no longer always at 117-122
    for b in batches[:3]:
        for row, w, n, q in zip(b.ids, b.weights, b.lengths, b.question_positions, strict=True):
            assert (row[n:] == codec.vocab["<pad>"]).all() and (w[n - 1 :] == 0).all() and (w[: n - 1] > 0).all()
            if q is not None:
                assert codec.decode(row[q : q + 6].tolist()) == "what is the pass key ?"
                assert (w[n - 6 : n - 1] == 10.0).all()  # the five answer predictions


def test_right_padding_is_invisible_to_the_sequence():
    """Causal attention: a padded sequence's logits on its real tokens equal those of the sequence alone."""
    train = _train_module()
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM._from_config(train.model_config("alibi"), attn_implementation=train.ATTENTION_NAME)
    codec, lang = ToyCodec(), ToyLanguage()
    doc = build_passkey(codec, [codec.vocab["<bos>"]], 70, 0.4, np.random.default_rng(5), lang)
    padded = doc.ids + [codec.vocab["<pad>"]] * (WINDOW - 70)
    with torch.no_grad():
        alone = model(torch.tensor([doc.ids])).logits[0]
        inside = model(torch.tensor([padded])).logits[0, :70]
    torch.testing.assert_close(inside, alone, atol=1e-5, rtol=1e-5)


def _short_run(train, monkeypatch, cache, stop_after=None):
    """6 steps of the learned recipe (seeded as the real one); optionally interrupted after `stop_after` steps."""
    recipe = train.Recipe("tiny-learned", "learned", ((6, 3e-3),), seed=1)
    step = train.train_step
    calls = {"n": 0}

    def interrupting(*args, **kwargs):
        if stop_after is not None and calls["n"] == stop_after:
            raise KeyboardInterrupt
        calls["n"] += 1
        return step(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(train, "train_step", interrupting)
        model, record = train.train(recipe, lambda msg: None, cache)
    return {k: v.clone() for k, v in model.state_dict().items()}, record


def test_short_schedule_is_bit_identical_and_resumes_bit_identically(tmp_path, monkeypatch):
    train = _train_module()
    for name, value in (("MAX_EXTRA_STAGES", 0), ("CHECKPOINT_EVERY", 2), ("EVAL_NEEDLES", 10)):
        monkeypatch.setattr(train, name, value)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        first, record = _short_run(train, monkeypatch, None)
        with pytest.raises(KeyboardInterrupt):
            _short_run(train, monkeypatch, tmp_path / "cache", stop_after=3)  # the checkpoint of step 2 survives
        resumed, resumed_record = _short_run(train, monkeypatch, tmp_path / "cache")
    finally:
        torch.set_num_threads(threads)
    assert record["steps"] == resumed_record["steps"] == 6
    assert first.keys() == resumed.keys() and "model.learned_positions.weight" in first
    for key in first:  # equal bit for bit: resumption is exact and nothing is drawn from an unseeded source
        assert torch.equal(first[key], resumed[key]), key


def _random_learned_model(n_positions: int = 16):
    train = _train_module()
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM._from_config(train.model_config("learned")).eval()
    lp.add_learned_positions(model, n_positions, init_std=1.0)
    return model


def test_positions_past_the_table_are_clamped_and_counted():
    model = _random_learned_model(16)
    seen = {}
    model.model.layers[0].register_forward_pre_hook(lambda m, args: seen.update(h=args[0].detach().clone()))
    ids = torch.randint(3, 120, (1, 40))
    with torch.no_grad():
        model(ids)
    table = model.model.learned_positions.weight
    expected = model.model.embed_tokens(ids)[0] + table[torch.arange(40).clamp(max=15)]
    torch.testing.assert_close(seen["h"][0], expected)
    assert lp.clamp_record(model) == {"pe_table": 16, "pe_clamped_share": pytest.approx(24 / 40)}
    with torch.no_grad():
        model(ids[:, :16])
    assert lp.clamp_record(model)["pe_clamped_share"] == 0.0
    assert lp.settings(model) == {"learned_positions": 16, "beyond_table": "clamped"}
    assert lp.clamp_record(_train_module_model("rope")) == {}


def _train_module_model(posenc: str):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM._from_config(_train_module().model_config(posenc))


def test_learned_positions_need_rope_disabled():
    with pytest.raises(ValueError, match="RoPE disabled"):
        lp.add_learned_positions(_train_module_model("rope"), 16)


@pytest.fixture(scope="module")
def tiny_learned():
    from longctx_eval.models.hf.adapter import HFCausalLM
    from longctx_eval.models.spec import parse_spec

    return HFCausalLM(parse_spec("tiny-learned"))


def test_tiny_learned_loads_with_its_table_and_clamps_past_128(tiny_learned):
    model = tiny_learned.model
    meta = json.loads((REFERENCE_ROOT / "tiny-learned" / "reference.json").read_text())
    assert meta["learned_positions"]["table"] == 128 and meta["learned_positions"]["beyond_table"] == "clamped"
    assert meta["passkey_accuracy_1x"] >= 0.95
    assert model.model.learned_positions.n_positions == 128
    assert tiny_learned.meta.settings["learned_positions"] == 128
    assert not torch.equal(model.model.learned_positions.weight[0], model.model.learned_positions.weight[127])
    with torch.no_grad():
        model(torch.randint(3, 120, (1, 512)))
    assert lp.clamp_record(model)["pe_clamped_share"] == pytest.approx((512 - 128) / 512)


def test_tiny_learned_cached_generation_equals_a_full_forward(tiny_learned):
    """Greedy decoding with a KV cache (positions from the cache length) across the table's end: same logits."""
    model = tiny_learned.model
    codec = ToyCodec()
    doc = build_passkey(codec, [codec.vocab["<bos>"]], 120, 0.3, np.random.default_rng(9), ToyLanguage())
    prompt = torch.tensor([doc.ids[:-5]])  # up to the question; generation runs past position 128
    with torch.no_grad():
        out = model.generate(
            prompt, max_new_tokens=24, do_sample=False, output_logits=True, return_dict_in_generate=True, pad_token_id=0
        )
        full = model(out.sequences).logits[0]
    n = prompt.shape[1]
    cached = torch.stack([step[0] for step in out.logits])
    torch.testing.assert_close(cached, full[n - 1 : n - 1 + 24], atol=1e-4, rtol=1e-4)
    assert out.sequences.shape[1] > 128


def test_rope_variants_are_refused_on_tiny_learned():
    from longctx_eval.models.hf.adapter import HFCausalLM
    from longctx_eval.models.spec import parse_spec

    with pytest.raises(ConfigError, match="rope=yarn"):
        HFCausalLM(parse_spec("hf:tiny-learned?rope=yarn&max_length=65536"))


def test_the_probe_reports_the_clamped_share_per_prediction(tmp_path):
    from longctx_eval.cli import main

    args = ["run", "--model", "tiny-learned", "--tasks", "posprobe", "--lengths", "128,512", "--limit", "3"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    records = [json.loads(line) for line in (tmp_path / "tiny-learned" / "predictions.jsonl").read_text().splitlines()]
    shares = {(r["data"]["length"], "text_tokens" in r["data"]): r["data"]["pe_clamped_share"] for r in records}
    assert shares == {(128, False): 0.0, (512, False): 0.75, (128, True): 0.0, (512, True): 0.75}
    run = json.loads((tmp_path / "tiny-learned" / "run.json").read_text())
    assert run["model"]["settings"]["beyond_table"] == "clamped"
    pooled = {r["length"]: r["value"] for r in run["tasks"][0]["results"] if r["metric"] == "pe_clamped_share"}
    assert pooled[128] == 0.0 and pooled[512] == 0.75
