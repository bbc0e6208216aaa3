"""Gemma 3 270M's choices scored in one forward (opt-in: `make gemma3`, then `pytest -m gemma3` on this file): with
15 of 18 layers sliding at 512 tokens, `score_packed` masks each layer type apart. On coref_synthetic questions past
the window (the prompt's last 256 tokens and the choices in one forward) every choice's log-probability equals a
plain forward of prompt + choice (no cache) to 1e-4, as the per-choice path does; a sliding mask that forgets the
window is off by far more, so the prompts exercise it."""

from __future__ import annotations

import pytest

from longctx_eval.models.assets import gemma3_installed

pytestmark = [
    pytest.mark.gemma3,
    pytest.mark.skipif(not gemma3_installed(), reason="Gemma 3 270M is not installed: `make gemma3`"),
]


@pytest.fixture(scope="module")
def gemma():
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    model = load_model(parse_spec("gemma3-270m"))
    yield model
    model.close()


def _requests(model, n: int):
    from benchmarks.vllm_grid import _requests as grid_requests
    from longctx_eval.discovery import discover
    from longctx_eval.run.sampling import build_samples

    info = discover()["coref_synthetic"]
    task = info.build({"per_length": 1}, lengths=[1024], seed=0, tokenizer=model.tokenizer)
    samples = build_samples(info, task, None).samples
    return [r for _, r in grid_requests(task, samples)][:n]


def _packed(model, request):
    import torch

    from longctx_eval.models.hf import likelihood

    prompt = model.render(request)
    with torch.no_grad():
        cache = model._scratch.fresh()
        start = len(prompt) - likelihood.LEAD_TOKENS  # the prompt's tail goes into the choices' forward
        likelihood.prefill_last(model.model, prompt[:start], cache, 0, None)
        got = likelihood.score_packed(model.model, prompt, start, model._choice_ids(request).ids, cache)
    assert cache.get_seq_length() == len(prompt)  # cut back to the prompt for the next request
    return got


def _full(model, request):
    import torch

    from longctx_eval.models.hf.likelihood import score_full

    with torch.no_grad():
        return score_full(model.model, model.render(request), model._choice_ids(request).ids)


def test_packed_choices_equal_a_plain_forward_past_the_window(gemma):
    assert gemma._pack_choices
    window = gemma.model.config.sliding_window
    requests = _requests(gemma, 4)
    worst = 0.0
    for request in requests:
        assert len(gemma.render(request)) > 1.5 * window
        choices = gemma._choice_ids(request).ids
        assert max(len(c) for c in choices) >= 3  # later choice tokens see a window that has moved past a key
        got, want = _packed(gemma, request), _full(gemma, request)
        worst = max(worst, *(abs(a - b) for a, b in zip(got.logprobs, want.logprobs, strict=True)))
        assert got.greedy == want.greedy
    assert worst < 1e-4, worst


def test_the_adapter_serves_them_packed_and_reuses_the_document(gemma):
    from longctx_eval.capability import Capability

    requests = _requests(gemma, 3)
    preds = gemma.serve(Capability.LOGLIKELIHOOD, requests)
    assert [p.status for p in preds] == ["ok"] * 3
    assert preds[1].data["cached_tokens"] > 0 and preds[2].data["cached_tokens"] > 0
    for request, pred in zip(requests, preds, strict=True):
        want = _full(gemma, request).logprobs
        assert max(abs(a - b) for a, b in zip(pred.data["logprobs"], want, strict=True)) < 1e-4


def test_a_sliding_mask_without_the_window_differs(gemma, monkeypatch):
    """The power check: a sliding mask showing every held prompt key (the window ignored) moves a log-probability by
    more than 1e-3 on these prompts, so the equality above does depend on the window being masked."""
    from longctx_eval.models.hf import likelihood

    real = likelihood._packed_allowed

    def no_window(positions, group, held, window):
        if window is None:
            return real(positions, group, held, None)
        mask = real(positions, group, min(held, window - 1), None)  # every key the sliding layer holds
        return mask

    monkeypatch.setattr(likelihood, "_packed_allowed", no_window)
    request = _requests(gemma, 5)[4]
    got, want = _packed(gemma, request), _full(gemma, request)
    assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs, strict=True)) > 1e-3
