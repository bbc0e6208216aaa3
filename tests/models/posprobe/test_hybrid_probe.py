"""The probe on a hybrid model (sliding-window and global layers, as Gemma 3), on a tiny random Gemma 3 built here
(real transformers code, no weights to download): outputs and rows equal eager attention with transformers' own
sliding mask, NPB/LAE read the global layers only and say so, and only an all-sliding model is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from longctx_eval.models.posprobe.attention_rows import ATTENTION_NAME, sliding_attention
from longctx_eval.models.posprobe.forward import AttentionProbe, ProbeConfig, forward_rows, probed_layers
from longctx_eval.models.posprobe.support import probe_refusal
from longctx_eval.sample import Request

WINDOW = 8
LENGTH = 40
QUERIES = [5, 20, 38, 39]
TYPES = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention"]


def _gemma(types: list[str] = TYPES) -> Gemma3ForCausalLM:
    torch.manual_seed(5)
    cfg = Gemma3TextConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=len(types),
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=WINDOW,
        layer_types=types,
        max_position_embeddings=128,
        query_pre_attn_scalar=8,
    )
    return Gemma3ForCausalLM(cfg).eval()


def _ids() -> torch.Tensor:
    return torch.randint(0, 64, (1, LENGTH), generator=torch.Generator().manual_seed(2))


def test_sliding_blocks_equal_sdpa_with_the_sliding_mask():
    torch.manual_seed(0)
    q = torch.randn(1, 4, 37, 8)
    k, v = torch.randn(1, 2, 37, 8), torch.randn(1, 2, 37, 8)
    i, j = torch.arange(37)[:, None], torch.arange(37)[None, :]
    mask = (j <= i) & (j > i - WINDOW)
    want = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), attn_mask=mask, scale=0.3
    ).transpose(1, 2)
    torch.testing.assert_close(sliding_attention(q, k, v, 0.3, WINDOW), want, atol=1e-6, rtol=1e-5)


def test_hybrid_rows_and_outputs_equal_eager_attention():
    model = _gemma()
    ids = _ids()
    model.set_attn_implementation("eager")  # transformers' own sliding mask on the sliding layers
    with torch.no_grad():
        eager = model(ids, output_attentions=True)
    want = torch.stack([a[0][:, QUERIES, :] for a in eager.attentions]).numpy()
    model.set_attn_implementation(ATTENTION_NAME)
    fwd = forward_rows(model, ids[0].tolist(), QUERIES)
    assert probed_layers(model.config) == [2, 4]
    assert fwd.rows.shape == (2, 4, len(QUERIES), LENGTH)
    np.testing.assert_allclose(fwd.rows, want[[2, 4]], atol=2e-6)
    assert fwd.window_rows is not None and fwd.window_rows.shape == (3, 4, len(QUERIES), LENGTH)
    np.testing.assert_allclose(fwd.window_rows, want[[0, 1, 3]], atol=2e-6)
    assert np.all(fwd.window_rows[:, :, 2, : 38 - WINDOW + 1] == 0.0)  # query 38 sees keys 31..38 only
    assert np.all(fwd.rows[:, :, 2, :30].sum(-1) > 0)  # a global layer sees the whole prefix
    logp = torch.log_softmax(eager.logits[0, :-1], -1)
    np.testing.assert_allclose(fwd.nll, (-logp.gather(1, ids[0, 1:, None])[:, 0]).numpy(), atol=1e-4)


def test_only_a_model_without_a_full_attention_layer_is_refused():
    assert probe_refusal(_gemma()) is None
    refusal = probe_refusal(_gemma(["sliding_attention"] * 3))
    assert refusal is not None and "sliding window of 8 tokens in every layer" in refusal


def test_the_probe_states_its_layers_and_heads_in_model_layer_numbers():
    model = _gemma()
    probe = AttentionProbe(model, ProbeConfig(train_length=64))
    ids = _ids()[0].tolist()
    seq = {"input_ids": ids[:24], "needle_positions": [10, 11], "answer_positions": [21, 22]}
    calibration = {"length": 24, "sequences": [seq, seq]}
    extra = {"input_ids": ids, "needle_positions": [12, 13], "answer_positions": [37, 38], "calibration": calibration}
    [pred] = probe.run([Request("s", "", "", "", max_new_tokens=0, extra=extra)])
    data = pred.data
    assert data["attention_layers"]["probed"] == [2, 4] and data["attention_layers"]["layers"] == 5
    assert "full-attention layers" in data["attention_layers"]["rule"]
    assert len(data["lae_layers"]) == 2 and data["lae_sliding"] > 0
    cal = data["calibration"]
    assert cal["layers"] == [2, 4] and len(cal["scores"]) == 2
    assert all(layer in (2, 4) for layer, _ in cal["heads"])


@pytest.mark.parametrize("layers", [None, [2, 4]])
def test_the_report_reads_head_scores_by_model_layer(tmp_path, layers):
    from longctx_eval.cli.posprobe import _calibration
    from longctx_eval.run_folder.predictions import PredictionStore

    cal = {"heads": [[4, 1]] if layers else [[1, 1]], "scores": [[0.0, 0.1], [0.2, 0.7]], "length": 24, "lae_ref": 1}
    if layers:
        cal["layers"] = layers
    record = {
        **dict.fromkeys(("text", "error", "prompt_tokens", "completion_tokens")),
        **{"key": "0" * 64, "task": "posprobe", "sample_id": "s", "status": "ok", "seconds": 0.0, "hits": []},
        "data": {"calibration": cal},
    }
    PredictionStore(tmp_path / "predictions.jsonl").append(record)
    got = _calibration(tmp_path)
    assert got is not None and got["head_scores"] == [0.7]
