"""The row probe equals eager attention (RoPE with GQA, and ALiBi), and RoPE variants act as documented."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import eager_attention_forward

from longctx_eval.errors import ConfigError
from longctx_eval.models.posprobe.alibi_attention import alibi_bias, alibi_causal_attention, alibi_slopes
from longctx_eval.models.posprobe.attention_rows import ATTENTION_NAME, capture_rows
from longctx_eval.models.posprobe.forward import forward_rows
from longctx_eval.models.posprobe.rope_variants import (
    check_variant,
    ntk_theta,
    rope_applied,
    rotary_dim,
    variant_parameters,
)

QUERIES = [3, 17, 40, 62, 63]


def _eager_alibi(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """HF's own eager attention with the full ALiBi bias as its additive mask: the reference."""
    slopes = torch.tensor(module.config.alibi_slopes)
    bias = alibi_bias(slopes, torch.arange(query.shape[2]), key.shape[2])[None]
    return eager_attention_forward(module, query, key, value, bias, scaling=scaling, dropout=dropout)


AttentionInterface.register("test_eager_alibi", _eager_alibi)


def _model(alibi: bool, kv_heads: int = 2) -> LlamaForCausalLM:
    torch.manual_seed(3)
    rope = {"rope_type": "default", "rope_theta": 10_000.0}
    extra = {}
    if alibi:
        rope = {"rope_type": "proportional", "rope_theta": 10_000.0, "partial_rotary_factor": 0.0}
        extra["alibi_slopes"] = alibi_slopes(4)
    cfg = LlamaConfig(
        vocab_size=50,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=32,
        rope_parameters=rope,
        **extra,
    )
    return LlamaForCausalLM(cfg).eval()


def _eager_rows(model: LlamaForCausalLM, ids: torch.Tensor, impl: str) -> tuple[np.ndarray, torch.Tensor]:
    model.set_attn_implementation(impl)
    with torch.no_grad():
        out = model(ids, output_attentions=True)
    assert out.attentions and len(out.attentions) == model.config.num_hidden_layers  # SDPA would return ()
    rows = torch.stack([a[0][:, QUERIES, :] for a in out.attentions]).numpy()
    return rows, out.logits[0]


@pytest.mark.parametrize("alibi", [False, True], ids=["rope-gqa", "alibi"])
def test_row_probe_equals_eager_attention(alibi):
    model = _model(alibi)
    ids = torch.randint(0, 50, (1, 64), generator=torch.Generator().manual_seed(1))
    want_rows, want_logits = _eager_rows(model, ids, "test_eager_alibi" if alibi else "eager")
    model.set_attn_implementation(ATTENTION_NAME)
    fwd = forward_rows(model, ids[0].tolist(), QUERIES)
    assert fwd.rows.shape == (2, 4, len(QUERIES), 64)
    np.testing.assert_allclose(fwd.rows, want_rows, atol=2e-6)
    np.testing.assert_allclose(fwd.rows.sum(-1), 1.0, atol=1e-5)
    assert np.all(fwd.rows[:, :, 0, QUERIES[0] + 1 :] == 0.0)  # causal: no weight on future keys
    # the probe's outputs equal eager's too: its NLL and greedy tokens come from the same logits
    logp = torch.log_softmax(want_logits[:-1], -1)
    want_nll = -logp.gather(1, ids[0, 1:, None])[:, 0]
    np.testing.assert_allclose(fwd.nll, want_nll.numpy(), atol=1e-4)
    assert fwd.greedy.tolist() == want_logits[:-1].argmax(-1).tolist()


def test_alibi_blocks_match_one_block():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, 70, 8) for _ in range(3))
    slopes = torch.tensor(alibi_slopes(4))
    one = alibi_causal_attention(q, k, v, slopes, 0.3, block=1024)
    blocks = alibi_causal_attention(q, k, v, slopes, 0.3, block=16)
    torch.testing.assert_close(one, blocks, atol=1e-6, rtol=1e-5)


def test_missing_layers_are_an_error_not_silence():
    model = _model(False)
    model.set_attn_implementation("sdpa")  # does not capture
    with pytest.raises(RuntimeError, match="captured for 0 of 2 layers"), capture_rows([5]) as cap, torch.no_grad():
        model(torch.zeros(1, 8, dtype=torch.long))
        cap.stacked(2)


def test_rope_variants_are_identity_inside_the_window_and_differ_beyond():
    model = _model(False, kv_heads=4)
    model.set_attn_implementation(ATTENTION_NAME)
    base = dict(model.config.rope_parameters)
    ids = torch.randint(0, 50, (64,), generator=torch.Generator().manual_seed(2)).tolist()
    plain = forward_rows(model, ids[:32], [31]).rows
    for variant in ("linear", "dynamic", "ntk", "yarn", "yarn_notemp"):
        with rope_applied(model, variant_parameters(base, variant, 32, 32)):
            np.testing.assert_allclose(forward_rows(model, ids[:32], [31]).rows, plain, atol=1e-5)
    long_rows = {}
    for variant in ("none", "linear", "ntk", "yarn", "yarn_notemp"):
        with rope_applied(model, variant_parameters(base, variant, 64, 32)):
            long_rows[variant] = forward_rows(model, ids, [63]).rows
    assert model.base_model.rotary_emb.rope_type == "default"  # restored after each block
    assert model.base_model.rotary_emb.config.rope_parameters["rope_theta"] == base["rope_theta"]
    assert not np.allclose(long_rows["none"], long_rows["yarn"])
    assert not np.allclose(long_rows["none"], long_rows["ntk"])
    assert not np.allclose(long_rows["yarn"], long_rows["yarn_notemp"])  # the temperature is in the logits


def test_dynamic_rope_honours_train_length_like_transformers_dynamic_ntk():
    """rope=dynamic with train_length=16 on a model whose config says 32 equals transformers' own dynamic NTK on
    the same weights with a 16-token window (NTK alpha 4 at 64 tokens, not the config window's 2)."""
    model = _model(False, kv_heads=4)
    model.set_attn_implementation(ATTENTION_NAME)
    ids = torch.randint(0, 50, (64,), generator=torch.Generator().manual_seed(5)).tolist()
    base = dict(model.config.rope_parameters)
    ref_cfg = LlamaConfig(**{**model.config.to_dict(), "max_position_embeddings": 16})
    ref_cfg.rope_parameters = {"rope_type": "dynamic", "factor": 1.0, "rope_theta": base["rope_theta"]}
    reference = LlamaForCausalLM(ref_cfg).eval()
    reference.load_state_dict(model.state_dict())
    reference.set_attn_implementation(ATTENTION_NAME)
    expected = forward_rows(reference, ids, [63]).rows
    with rope_applied(model, variant_parameters(base, "dynamic", 64, 16), train_length=16):
        np.testing.assert_allclose(forward_rows(model, ids, [63]).rows, expected, atol=1e-5)
    with rope_applied(model, variant_parameters(base, "dynamic", 64, 32), train_length=32):
        config_window = forward_rows(model, ids, [63]).rows
    assert not np.allclose(config_window, expected, atol=1e-4)  # the window matters: this was the bug


def _reference_dynamic(model: LlamaForCausalLM, window: int) -> LlamaForCausalLM:
    """The same weights under transformers' own dynamic NTK (factor 1) with a `window`-token training length."""
    cfg = LlamaConfig(**{**model.config.to_dict(), "max_position_embeddings": window})
    cfg.rope_parameters = {
        "rope_type": "dynamic",
        "factor": 1.0,
        "rope_theta": model.config.rope_parameters["rope_theta"],
    }
    reference = LlamaForCausalLM(cfg).eval()
    reference.load_state_dict(model.state_dict())
    reference.set_attn_implementation(ATTENTION_NAME)
    return reference


@pytest.mark.parametrize(
    ("length", "train", "factor", "alpha"), [(64, 16, None, 4.0), (64, 32, 3.0, 3.0), (16, 32, None, 1.0)]
)
def test_ntk_rotary_frequencies_follow_the_formula(length, train, factor, alpha):
    """inv_freq_i = 1 / (theta * alpha^(d/(d-2)))^(2i/d), alpha = max(1, L / L_train) or rope_factor."""
    model = _model(False, kv_heads=4)
    base = dict(model.config.rope_parameters)
    d = rotary_dim(model.config)
    assert d == 16  # 64 hidden / 4 heads
    params = variant_parameters(base, "ntk", length, train, factor)
    assert params == {"rope_type": "ntk", "factor": alpha, "rope_theta": 1e4}
    theta = 1e4 * alpha ** (d / (d - 2))
    assert ntk_theta(1e4, alpha, d) == pytest.approx(theta, rel=1e-12)
    want = 1.0 / theta ** (np.arange(0, d, 2) / d)
    with rope_applied(model, params):
        got = model.base_model.rotary_emb.inv_freq.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    plain = model.base_model.rotary_emb.inv_freq.numpy()
    assert np.array_equal(got, plain) == (alpha == 1.0)  # alpha 1 is the unscaled model, bit for bit


def test_ntk_equals_transformers_dynamic_ntk_for_one_forward_pass():
    """Static NTK at alpha = L / L_train is what HF's dynamic NTK (factor 1) computes for one pass of L tokens:
    the same inverse frequencies from HF's own init function and the same attention rows."""
    model = _model(False, kv_heads=4)
    model.set_attn_implementation(ATTENTION_NAME)
    reference = _reference_dynamic(model, 16)
    hf_inv, _ = ROPE_INIT_FUNCTIONS["dynamic"](reference.config, None, seq_len=64)
    with rope_applied(model, variant_parameters(dict(model.config.rope_parameters), "ntk", 64, 16)):
        np.testing.assert_allclose(model.base_model.rotary_emb.inv_freq.numpy(), hf_inv.numpy(), rtol=1e-6)
        ids = torch.randint(0, 50, (64,), generator=torch.Generator().manual_seed(7)).tolist()
        ntk_rows = forward_rows(model, ids, [40, 63]).rows
    np.testing.assert_allclose(ntk_rows, forward_rows(reference, ids, [40, 63]).rows, atol=1e-5)


def test_variant_parameters_follow_hf_conventions():
    base = {"rope_type": "default", "rope_theta": 1e4}
    assert variant_parameters(base, "linear", 512, 128) == {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e4}
    assert variant_parameters(base, "yarn", 2048, 128)["factor"] == 16.0
    assert variant_parameters(base, "yarn", 64, 128)["factor"] == 1.0  # never compresses inside the window
    assert variant_parameters(base, "yarn_notemp", 2048, 128)["attention_factor"] == 1.0
    assert variant_parameters(base, "dynamic", 2048, 128)["factor"] == 1.0
    assert variant_parameters(base, "yarn", 2048, 128, factor=8.0)["factor"] == 8.0
    with pytest.raises(ConfigError, match="unknown"):
        variant_parameters(base, "ntk_by_parts", 10, 10)


def test_rope_variants_are_refused_for_alibi():
    with pytest.raises(ConfigError, match="ALiBi"):
        check_variant(_model(True).config, "yarn")
    check_variant(_model(True).config, "none")
