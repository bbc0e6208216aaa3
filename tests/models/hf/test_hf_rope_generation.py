"""RoPE options reach generation (issue 17): `rope=X&rope_factor=F` sets the config's rope parameters before the
weights load, so the text differs from the unscaled model's and equals, token for token, a model folder whose
config.json carries the same parameters; without a factor, generation uses the probe's per-length rule. `rope=`
on a model without RoPE and `max_length` past a learned position table are refused before loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from longctx_eval.errors import ConfigError
from longctx_eval.models.loader import load_model
from longctx_eval.models.posprobe.rope_variants import ntk_theta
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request

THETA = 10_000.0


def _tokenizer(folder: Path):
    from conftest import _train_bpe
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=_train_bpe(), bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    tok.save_pretrained(folder)
    return tok


@pytest.fixture(scope="module")
def sharp_llama(tmp_path_factory) -> Path:
    """A random Llama whose attention is sharp enough (init std 0.2) for positions to change its greedy text."""
    from transformers import LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("sharp-llama")
    tok = _tokenizer(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.2,
        rope_parameters={"rope_type": "default", "rope_theta": THETA},
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


def with_config(src: Path, dst: Path, **changes) -> Path:
    """A copy of model folder `src` whose config.json has `changes` (the same weights and tokenizer)."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name != "config.json":
            (dst / f.name).symlink_to(f.resolve())
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(changes)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


def _prompts(n: int = 3) -> list[Request]:
    from data_builders import get_source

    paragraphs = get_source("synthetic").paragraphs(seed=11)
    out = []
    for i in range(n):
        text = " ".join(next(paragraphs) for _ in range(2 + i))
        out.append(Request(f"r{i}", f"{text}\n\nWhat is this about?", text, "q", max_new_tokens=12))
    return out


def generated_ids(adapter, requests: list[Request]) -> list[list[int]]:
    """The token ids each request generated (what the adapter decodes into its text), one request at a time."""
    seen: list[list[int]] = []
    decode = adapter._completion

    def spy(new):
        seen.append(list(new))
        return decode(new)

    adapter._completion = spy
    try:
        for r in requests:
            adapter.generate([r])
    finally:
        adapter._completion = decode
    return seen


STATIC = {
    "linear": ("", {"rope_type": "linear", "factor": 4.0, "rope_theta": THETA}, {}),
    "yarn": (
        "",
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512, "rope_theta": THETA},
        {},
    ),
    "ntk": ("", {"rope_type": "default", "rope_theta": ntk_theta(THETA, 4.0, 16)}, {}),
    # HF's dynamic NTK scales only past max_position_embeddings: a 64-token training window puts the prompts past it
    "dynamic": (
        "&train_length=64",
        {"rope_type": "dynamic", "factor": 4.0, "rope_theta": THETA},
        {"max_position_embeddings": 64},
    ),
}


@pytest.mark.parametrize("variant", list(STATIC))
def test_static_rope_changes_generation_and_equals_the_config_folder(sharp_llama, tmp_path, variant):
    extra, params, more = STATIC[variant]
    reqs = _prompts()
    plain = load_model(parse_spec(f"hf:{sharp_llama}"))
    scaled = load_model(parse_spec(f"hf:{sharp_llama}?rope={variant}&rope_factor=4{extra}"))
    folder = load_model(parse_spec(f"hf:{with_config(sharp_llama, tmp_path / 'cfg', rope_parameters=params, **more)}"))
    base, got, want = (generated_ids(m, reqs) for m in (plain, scaled, folder))
    assert got == want  # token for token: the options did exactly what the config would
    assert got != base  # and generation is no longer the unscaled model's
    assert scaled.model.config.rope_parameters == params
    assert scaled.identity["rope_generation"] == "static"  # predictions of the old, unscaled behaviour are stale
    rt = scaled.meta.runtime
    assert rt["rope"]["scaling"] == "static" and rt["rope"]["config_rope_parameters"] == params
    train = 64 if variant == "dynamic" else 512
    assert scaled.meta.context_window == 4 * train
    assert rt["window"]["source"].startswith(f"rope={variant} rope_factor=4 x original window {train}")


def test_static_rope_and_the_prefix_cache_see_the_same_positions(sharp_llama):
    on = load_model(parse_spec(f"hf:{sharp_llama}?rope=linear&rope_factor=4"))
    off = load_model(parse_spec(f"hf:{sharp_llama}?rope=linear&rope_factor=4&prefix_cache=false"))
    doc = " ".join(f"Fact {i}: the value of key{i} is {i * 7}." for i in range(40))
    reqs = [Request(f"q{i}", f"{doc}\n\nWhat is key{i}?", doc, "q", max_new_tokens=10) for i in (3, 17)]
    assert generated_ids(on, reqs) == generated_ids(off, reqs)
    assert on.prefix_cache.stats.reused == 1


def test_per_length_rope_generation_uses_the_probes_rule(sharp_llama, tmp_path):
    """rope=linear without a factor: s = max(1, L / train_length) with L = prompt + generation budget, as the
    probe scales a sequence; inside the training window it is the unscaled model."""
    model = load_model(parse_spec(f"hf:{sharp_llama}?rope=linear&train_length=64"))
    assert model.meta.runtime["rope"]["scaling"] == "per_length" and model.prefix_cache.enabled is False
    req = _prompts(1)[0]
    length = len(model.render(req)) + req.max_new_tokens
    assert length > 64
    params = {"rope_type": "linear", "factor": length / 64, "rope_theta": THETA}
    folder = load_model(parse_spec(f"hf:{with_config(sharp_llama, tmp_path / 'per', rope_parameters=params)}"))
    assert generated_ids(model, [req]) == generated_ids(folder, [req])
    short = Request("s", "A few words.", "", "q", max_new_tokens=4)
    assert len(model.render(short)) + 4 <= 64
    plain = load_model(parse_spec(f"hf:{sharp_llama}"))
    assert generated_ids(model, [short]) == generated_ids(plain, [short])


@pytest.mark.slow  # three SmolLM2 loads and six 1K-token generations: opt-in (-m slow)
def test_smollm2_linear_rope_changes_the_needle_answers_and_equals_its_config_folder(tmp_path, capsys):
    """The issue's measurement: smollm2-135m?rope=linear&rope_factor=4 on needle at 1K generated exactly the
    unscaled text. Now it does not, and it is token for token the model whose config.json says linear x4."""
    from longctx_eval.discovery import discover
    from longctx_eval.models.assets import smollm2_dir
    from longctx_eval.run.sampling import build_samples

    plain = load_model(parse_spec("smollm2-135m"))
    scaled = load_model(parse_spec("smollm2-135m?rope=linear&rope_factor=4"))
    info = discover().get("needle")
    task = info.build({}, lengths=[1024], seed=0, tokenizer=plain.tokenizer)
    samples = build_samples(info, task, 2).samples
    reqs = [r for s in samples for r in (lambda x: x if isinstance(x, list) else [x])(task.requests(s))]
    params = {"rope_type": "linear", "factor": 4.0, "rope_theta": 100_000.0}
    folder = load_model(parse_spec(f"hf:{with_config(smollm2_dir(), tmp_path / 'smol', rope_parameters=params)}"))
    base, got = generated_ids(plain, reqs), generated_ids(scaled, reqs)
    assert generated_ids(folder, reqs[:1]) == got[:1]
    assert got != base
    assert scaled.meta.context_window == 4 * 8192
    with capsys.disabled():  # the closing note quotes these
        for r, b, g in zip(reqs, base, got, strict=True):
            print(f"\n{r.sample_id}: unscaled {plain._completion(b)[0]!r} | linear x4 {scaled._completion(g)[0]!r}")


# -- refusals before loading ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    out = tmp_path_factory.mktemp("tiny-gpt2")
    tok = _tokenizer(out)
    torch.manual_seed(0)
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    cfg = GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=2, n_head=2, **ids)
    GPT2LMHeadModel(cfg).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def bloom_dir(tmp_path_factory) -> Path:
    from transformers import BloomConfig, BloomForCausalLM

    out = tmp_path_factory.mktemp("tiny-bloom")
    tok = _tokenizer(out)
    torch.manual_seed(0)
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    BloomForCausalLM(BloomConfig(vocab_size=len(tok), hidden_size=32, n_layer=2, n_head=2, **ids)).save_pretrained(out)
    return out


def _refused(monkeypatch, spec: str) -> str:
    from transformers import AutoModelForCausalLM

    def refuse(*args, **kwargs):
        raise AssertionError("weights were loaded before the refusal")

    parsed = parse_spec(spec)
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", refuse)
    with pytest.raises(ConfigError) as info:
        load_model(parsed)
    msg = str(info.value)
    assert "\n" not in msg and repr(spec) in msg
    return msg


def test_rope_on_gpt2_is_refused_before_loading(gpt2_dir, monkeypatch):
    msg = _refused(monkeypatch, f"hf:{gpt2_dir}?rope=linear&rope_factor=2")
    assert "gpt2 has no rotary position embedding (learned absolute positions (a table of 128))" in msg
    assert "Use rope=none" in msg


def test_rope_on_bloom_is_refused_before_loading(bloom_dir, monkeypatch):
    msg = _refused(monkeypatch, f"hf:{bloom_dir}?rope=yarn")
    assert "bloom has no rotary position embedding (ALiBi)" in msg


def test_max_length_past_the_learned_table_is_refused_before_loading(gpt2_dir, monkeypatch):
    msg = _refused(monkeypatch, f"hf:{gpt2_dir}?max_length=256")
    assert "max_length=256 is past gpt2's learned position table (128 positions)" in msg
    assert "max_length <= 128" in msg


def test_gpt2_within_its_table_loads_and_generates(gpt2_dir):
    model = load_model(parse_spec(f"hf:{gpt2_dir}?max_length=128"))
    assert model.meta.context_window == 128
    pred = model.generate([Request("g", "Hello there, how are you?", "", "q", max_new_tokens=4)])[0]
    assert pred.status == "ok" and pred.completion_tokens


def test_gpt_neox_partial_rotary_static_rope_equals_its_config_folder(tmp_path):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    src = tmp_path / "neox"
    tok = _tokenizer(src)
    torch.manual_seed(1)
    cfg = GPTNeoXConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=512,
        initializer_range=0.2,
        rope_parameters={"rope_type": "default", "rope_theta": THETA, "partial_rotary_factor": 0.25},
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    GPTNeoXForCausalLM(cfg).save_pretrained(src)
    params = {"rope_type": "linear", "factor": 2.0, "rope_theta": THETA, "partial_rotary_factor": 0.25}
    scaled = load_model(parse_spec(f"hf:{src}?rope=linear&rope_factor=2"))
    folder = load_model(parse_spec(f"hf:{with_config(src, tmp_path / 'neox-cfg', rope_parameters=params)}"))
    reqs = _prompts(2)
    assert generated_ids(scaled, reqs) == generated_ids(folder, reqs)
    assert scaled.meta.context_window == 1024


def test_static_probe_equals_the_probe_of_before_on_the_reference():
    """tiny-rope with rope=linear&rope_factor=4: now loaded with the variant in its config, the probe's results
    are exactly those of the unscaled load with the variant applied per forward (how the probe always ran)."""
    from dataclasses import replace

    from longctx_eval.models.posprobe.forward import AttentionProbe
    from longctx_eval.models.references import REFERENCE_ROOT

    if not (REFERENCE_ROOT / "tiny-rope" / "model.safetensors").is_file():
        pytest.skip("reference weights not built")
    from test_hf_placement import _probe_requests, _stable

    static = load_model(parse_spec("hf:tiny-rope?rope=linear&rope_factor=4&max_length=65536"))
    assert static.model.config.rope_parameters["rope_type"] == "linear"
    unscaled = load_model(parse_spec("hf:tiny-rope?max_length=65536"))
    before = AttentionProbe(unscaled.model, replace(unscaled.probe.config, variant="linear", factor=4.0))
    reqs = _probe_requests(static, 512)
    got = [_stable(p.data) for p in static.attention_stats(reqs)]
    from longctx_eval.models.posprobe.forward import rows_attention

    with rows_attention(unscaled.model):
        want = [_stable(before._one(r).data) for r in reqs]
    assert got == want
