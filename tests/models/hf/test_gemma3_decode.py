"""Gemma 3 270M's decode path changes no answer (opt-in: `make gemma3`, then `pytest -m gemma3` on this file): the
needle at 2K over 3 depths of one haystack, in the runner's order, through `gemma3-270m` (prefix cache on: sliding
layers recording their past, cache layers growing in place, models/hf/growing_cache.py) and through
`gemma3-270m?prefix_cache=false` (transformers' own cache, nothing of ours): the same greedy tokens for every
sample, with prefixes really reused. 11 minutes on 2 CPU cores at a load average of 15."""

from __future__ import annotations

import pytest

from longctx_eval.models.assets import gemma3_installed

pytestmark = [
    pytest.mark.gemma3,
    pytest.mark.skipif(not gemma3_installed(), reason="Gemma 3 270M is not installed: `make gemma3`"),
]


def test_greedy_replies_are_those_of_transformers_own_cache():
    from benchmarks.vllm_grid import build_grid, serving_order
    from longctx_eval.models.hf.growing_cache import GrowingLayer, GrowingSlidingLayer
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    ours = load_model(parse_spec("gemma3-270m"))
    plain = load_model(parse_spec("gemma3-270m?prefix_cache=false"))
    try:
        task, samples, requests = build_grid(ours.tokenizer, {"lengths": [2048], "depths": 3, "haystacks": 1})
        order = serving_order(ours.bind(task, samples), samples, requests)
        got = [ours.generate([r])[0] for _, r, _ in order]
        held = ours.prefix_cache._cache
        assert {type(x) for x in held.layers} == {GrowingLayer, GrowingSlidingLayer}
        want = [plain.generate([r])[0] for _, r, _ in order]
    finally:
        ours.close()
        plain.close()
    assert [p.text for p in got] == [p.text for p in want]
    assert [p.completion_tokens for p in got] == [p.completion_tokens for p in want]
    cached = [p.data.get("cached_tokens", 0) for p in got]
    assert sum(c > 0 for c in cached) >= 1, cached  # a shared prefix was reused, not just a fresh prefill each time
    assert all(not p.data.get("prefix_cache_refused") for p in got), [p.data for p in got]


def test_a_long_prompt_prefilled_in_window_steps_decodes_as_in_one_step():
    """Past 2048 tokens a sliding-window model is prefilled in steps (`prefix_cache.window_chunk`: each sliding layer
    then attends only its window); the 4K needle's greedy tokens equal transformers' one-step prefill of its ids."""
    import torch

    from benchmarks.vllm_grid import build_grid
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    model = load_model(parse_spec("gemma3-270m?prefix_cache=false"))
    try:
        _task, _samples, requests = build_grid(model.tokenizer, {"lengths": [4096], "depths": 1, "haystacks": 1})
        request = requests[0][1]
        (pred,) = model.generate([request])
        ids = torch.tensor([model.render(request)])
        with torch.no_grad():
            out = model.model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=request.max_new_tokens, do_sample=False
            )
        text, n = model._completion(out[0, ids.shape[1] :].tolist())
    finally:
        model.close()
    assert pred.data["prefill_chunk"] == 2048
    assert (pred.text, pred.completion_tokens) == (text, n)
