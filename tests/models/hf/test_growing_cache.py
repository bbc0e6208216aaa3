"""models/hf/growing_cache.py: cache layers that grow in place hold exactly what transformers' concatenating layers
hold, through prefill, decode steps, a crop back to a prefix and a sliding layer's recorded past; and a tiny Gemma 3
greedy-decodes the same tokens with them as without."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer  # noqa: E402

from longctx_eval.models.hf.growing_cache import HEADROOM, GrowingLayer, GrowingSlidingLayer, grown  # noqa: E402


def _kv(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 2, n, 8, generator=g), torch.randn(1, 2, n, 8, generator=g)


def _steps(layer, plain, chunks, seed=0):
    """Feed both layers the same chunks; every returned pair and every held pair must be equal."""
    for i, n in enumerate(chunks):
        k, v = _kv(n, seed + i)
        got, want = layer.update(k, v), plain.update(k, v)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
        assert torch.equal(layer.keys, plain.keys) and torch.equal(layer.values, plain.values)
        assert layer.get_seq_length() == plain.get_seq_length()


def test_full_layer_grows_in_place_and_matches_concatenation():
    layer, plain = GrowingLayer(), DynamicLayer()
    _steps(layer, plain, [300, 1, 1, 1])
    buffer = layer._key_buffer
    assert buffer.shape[-2] == 300 + HEADROOM  # one allocation: the decode steps wrote into its spare rows
    assert layer.keys.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
    _steps(layer, plain, [HEADROOM], seed=10)  # past the spare rows: a new, larger buffer, same contents
    assert layer._key_buffer is not buffer and layer._key_buffer.shape[-2] > 300 + HEADROOM


def test_a_cropped_layer_writes_after_its_prefix():
    layer, plain = GrowingLayer(), DynamicLayer()
    _steps(layer, plain, [200, 1, 1])
    layer.crop(-50)
    plain.crop(-50)
    assert torch.equal(layer.keys, plain.keys)
    _steps(layer, plain, [40, 1, 1], seed=20)


def test_a_recording_sliding_layer_matches_transformers_and_crops_back():
    layer, plain = GrowingSlidingLayer(sliding_window=64), DynamicSlidingWindowLayer(sliding_window=64)
    for x in (layer, plain):
        x.activate_past_recording()
    _steps(layer, plain, [150, 1, 1])
    layer.crop(-30)
    plain.crop(-30)  # transformers keeps the 63 keys before the cut; ours keeps all 122
    assert layer.get_seq_length() == plain.get_seq_length() == 122
    assert torch.equal(layer.keys[:, :, -63:], plain.keys) and layer.keys.shape[-2] == 122
    for i, n in enumerate([20, 1]):  # what attention sees after the cut is the same
        k, v = _kv(n, 30 + i)
        assert all(torch.equal(a, b) for a, b in zip(layer.update(k, v), plain.update(k, v), strict=True))


def test_a_recording_sliding_layer_cut_back_once_can_be_cut_back_further():
    """transformers' crop keeps one window before the cut; ours keeps the past, so a second, shorter prefix is
    still reachable (the prefix cache's earliest cut stays 0) and holds exactly the positions of a fresh prefill."""
    from transformers import DynamicCache

    from longctx_eval.models.hf.prefix_cache import _earliest_cut

    layer = GrowingSlidingLayer(sliding_window=64)
    layer.activate_past_recording()
    k, v = _kv(300, 0)
    layer.update(k, v)
    layer.crop(-100)  # to 200
    layer.crop(0)  # a no-op: the past stays
    layer.crop(-80)  # to 120
    assert layer.get_seq_length() == 120 and torch.equal(layer.keys, k[:, :, :120])
    cache = DynamicCache()
    cache.layers = [layer]
    assert _earliest_cut(cache) == 0
    got = layer.update(*_kv(1, 5))
    assert got[0].shape[-2] == 64 and torch.equal(got[0][:, :, :63], k[:, :, 57:120])


def test_a_sliding_layer_not_recording_keeps_transformers_update():
    layer, plain = GrowingSlidingLayer(sliding_window=64), DynamicSlidingWindowLayer(sliding_window=64)
    _steps(layer, plain, [150, 1, 1])
    assert layer.keys.shape[-2] == 63 and layer._key_buffer is None


def test_grown_copies_a_tensor_that_is_no_view_of_its_buffer():
    k, _ = _kv(10, 0)
    out, buffer = grown(None, k, k[:, :, :2])
    assert torch.equal(out, torch.cat([k, k[:, :, :2]], dim=-2))
    other = out.clone()  # same values, not a view of `buffer`: copied into a new one
    out2, buffer2 = grown(buffer, other, k[:, :, :1])
    assert buffer2 is not buffer and torch.equal(out2, torch.cat([other, k[:, :, :1]], dim=-2))


def test_tiny_gemma3_decodes_the_same_tokens_with_and_without_growing_layers():
    from transformers import DynamicCache, Gemma3ForCausalLM, Gemma3TextConfig

    from longctx_eval.models.hf.adapter import _generate_cache_kwarg
    from longctx_eval.models.hf.prefix_cache import PrefixCache

    config = Gemma3TextConfig(
        vocab_size=512,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        sliding_window=16,
        layer_types=["sliding_attention", "full_attention"] * 2,
        max_position_embeddings=512,
        query_pre_attn_scalar=8,
    )
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config).eval()
    ids = torch.randint(5, 512, (1, 80), generator=torch.Generator().manual_seed(1))
    cache = PrefixCache(config)
    grown_cache = cache.fresh()
    assert {type(x) for x in grown_cache.layers} == {GrowingLayer, GrowingSlidingLayer}
    name = _generate_cache_kwarg()
    with torch.no_grad():
        a = model.generate(ids, **{name: grown_cache}, max_new_tokens=24, do_sample=False)
        b = model.generate(ids, **{name: DynamicCache(config=config)}, max_new_tokens=24, do_sample=False)
    assert torch.equal(a, b)
