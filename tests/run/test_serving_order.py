"""The runner's serving order: the contexts of one haystack together, in the order that shares the most prefix."""

from __future__ import annotations

import os

from longctx_eval.discovery import discover
from longctx_eval.run.runner import serving_order


def _shared(order, samples) -> int:
    """Characters each request's context shares with the previous request's, summed."""
    contexts = [r.context for _, r, _ in order]
    return sum(len(os.path.commonprefix([a, b])) for a, b in zip(contexts, contexts[1:], strict=False))


def _needle_requests(tokenizer, lengths, depths, per_cell):
    task = discover()["needle"].factory(
        lengths=lengths, tokenizer=tokenizer, depths=depths, per_cell=per_cell, source="synthetic"
    )
    samples = list(task.samples())
    return samples, [(i, r, 0) for i, s in enumerate(samples) for r in task.requests(s)]


def _best(samples, measured) -> int:
    """The most any order can share: per haystack, each context but the deepest shares the haystack up to its
    needle with a deeper one (the task's own order walks one haystack's depths in turn, which reaches it)."""
    by_haystack: dict[tuple, list] = {}
    for m in measured:
        meta = samples[m[0]].metadata
        by_haystack.setdefault((meta["target_tokens"], samples[m[0]].id.rsplit("-r", 1)[1]), []).append(m)
    return sum(_shared(sorted(g, key=lambda m: samples[m[0]].metadata["depth"]), samples) for g in by_haystack.values())


def test_several_haystacks_per_length_share_as_much_as_one_haystack_at_a_time(bpe_tokenizer):
    """Four haystacks of five depths at two lengths: the served order shares the optimum; serving by depth (the
    order this replaced) put another haystack's context after each one and shared almost nothing."""
    samples, measured = _needle_requests(bpe_tokenizer, [448, 512], depths=5, per_cell=4)
    order = serving_order(measured, samples)
    assert sorted(m[0] for m in order) == list(range(len(samples)))
    best = _best(samples, measured)
    by_depth = sorted(
        measured, key=lambda m: (samples[m[0]].metadata["target_tokens"], samples[m[0]].metadata["depth"])
    )
    assert best > 0 and _shared(order, samples) >= best
    assert _shared(by_depth, samples) < best / 10
    lengths = [samples[i].metadata["target_tokens"] for i, _, _ in order]
    assert lengths == sorted(lengths)  # lengths still run shortest first


def test_questions_on_one_context_run_back_to_back_in_part_order(bpe_tokenizer):
    """needle_multiquery asks several questions of one context: they stay adjacent, in part order."""
    task = discover()["needle_multiquery"].factory(lengths=[1024], tokenizer=bpe_tokenizer, source="synthetic")
    samples = list(task.samples())
    measured = [(i, r, 0) for i, s in enumerate(samples) for r in task.requests(s)]
    assert len(measured) > len(samples)
    order = serving_order(measured, samples)
    runs = [(i, r.part) for i, r, _ in order]
    for i in {i for i, _ in runs}:
        at = [k for k, (j, _) in enumerate(runs) if j == i]
        assert at == list(range(at[0], at[0] + len(at)))
        assert [runs[k][1] for k in at] == sorted(runs[k][1] for k in at)
