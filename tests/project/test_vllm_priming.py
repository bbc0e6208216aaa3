"""Prime then fill (`benchmarks/vllm_cache_blocks.py`, no vLLM): one primer per haystack, the holder of the deepest
shared prefix, so every block another request can reuse is in the primer's prompt. On synthetic haystacks (fast) and on
SmolLM2-rendered needle prompts of the bench grid (slow: building the grid loads MiniLM for its overlap check)."""

from __future__ import annotations

import random

import pytest

from benchmarks.vllm_cache_blocks import block_chains, primers
from benchmarks.vllm_grid import build_grid
from longctx_eval.models.hf.adapter import cached_render, uses_chat
from longctx_eval.models.model_source import hf_tokenizer_pair
from longctx_eval.models.spec import parse_spec


@pytest.fixture(scope="module")
def grid():
    """(samples, rendered ids) of the needle grid at 1K and 2K, 5 depths of one haystack each."""
    spec = parse_spec("hf:smollm2-135m")
    hf_tok, tok = hf_tokenizer_pair(spec)
    chat, memo = uses_chat(spec, hf_tok), {}
    _, samples, requests = build_grid(tok, {"lengths": [1024, 2048], "depths": 5, "haystacks": 1})
    return [samples[i] for i, _ in requests], [cached_render(memo, hf_tok, chat, r) for _, r in requests]


def lcp(a, b):
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@pytest.mark.slow
@pytest.mark.parametrize("block", [16, 128])
def test_one_primer_per_haystack_holding_every_reusable_block(grid, block):
    samples, rows = grid
    chosen = primers(rows, block)
    lengths = sorted(int(samples[i].metadata["target_tokens"]) for i in chosen)
    assert lengths == [1024, 2048]
    for i, ids in enumerate(rows):
        same = [
            j
            for j in range(len(rows))
            if j != i and samples[j].metadata["target_tokens"] == samples[i].metadata["target_tokens"]
        ]
        reusable = max(lcp(ids, rows[j]) for j in same) // block * block
        (p,) = [j for j in chosen if samples[j].metadata["target_tokens"] == samples[i].metadata["target_tokens"]]
        if i != p:  # what it can reuse from any sibling, the primer holds
            assert lcp(ids, rows[p]) // block * block == reusable
    depth = {float(samples[i].metadata["depth"]) for i in chosen}
    assert depth <= {0.75, 1.0}  # the deepest needles share the longest prefix


def test_synthetic_haystacks_get_one_primer_each_at_their_deepest_needle():
    rng = random.Random(0)
    hays = [[rng.randrange(50_000) for _ in range(1000)] for _ in range(2)]
    head, tail = [1] * 20, [2, 3]  # a template shared by all, a question after the context

    def prompt(hay, depth):
        at = int(depth * len(hay))
        return head + hay[:at] + [7, 7, 7] + hay[at:] + tail

    depths = (0.0, 0.25, 0.5, 0.75, 1.0)
    rows = [prompt(h, d) for h in hays for d in depths]
    for block in (16, 128):
        assert primers(rows, block) == [3, 8]  # depth 0.75 (ties with 1.0 go to the first sent), one per haystack
        assert primers(list(reversed(rows)), block) == [0, 5]  # now depth 1.0 comes first


def test_nothing_shared_means_no_primer_and_chains_match_full_blocks():
    assert primers([[1, 2, 3], [4, 5, 6]], 2) == []
    assert primers([[1, 2, 3, 4]], 2) == []
    assert primers([[1, 2, 3, 4], [1, 2, 9, 9], [7, 7]], 2) == [0]
    a, b = block_chains([[1, 2, 3, 4, 5], [1, 2, 3, 9]], 2)
    assert len(a) == 2 and len(b) == 2 and a[0] == b[0] and a[1] != b[1]
    with pytest.raises(ValueError, match="block size"):
        primers([[1]], 0)


def test_study_summary_and_table_on_made_up_runs():
    """The study's arithmetic: means over runs, the ratios, the bound shares and the block-granular token bound."""
    from benchmarks.vllm_cache_blocks import ideal_cached
    from benchmarks.vllm_priming import summarize, table

    assert ideal_cached([[1, 2, 3, 4, 5], [1, 2, 3, 4, 9], [7]], 2) == 4  # the second reuses 2 whole blocks
    assert ideal_cached([[1, 2, 3, 4], [1, 2, 3, 4]], 2) == 2  # never the whole prompt: its last token is computed

    def run(variant, seconds, cached):
        ideal = None if variant == "lm_eval" else (0 if "no_prefix" in variant else 30)
        texts = ["a"] * 10
        return {"variant": variant, "seconds": seconds, "cached_tokens": [cached], "prompt_tokens": 100,
                "ideal_cached_tokens": ideal, "load_1min": 1.0, "texts": texts}  # fmt: skip

    runs = [
        run("one_call", 10.0, 30), run("one_call", 12.0, 30), run("no_prefix", 13.2, 0), run("lm_eval", 22.0, 30),
        run("one_call/prefill", 8.0, 30), run("no_prefix/prefill", 11.2, 0),
    ]  # fmt: skip
    study = {"samples": 10, "runs": runs, "engine": {"block_size": 128}}
    s = summarize(study, 1.429)
    assert s["variants"]["one_call"]["seconds_per_sample"] == 1.1
    assert s["prefix_bought_total"] == 1.2 and s["prefix_bought_prefill"] == 1.4
    assert s["block_token_bound"] == round(100 / 70, 3)
    assert s["share_of_bound_prefill"] == round(1.4 / 1.429, 3)
    assert s["lm_eval_over_one_call"] == 2.0 and s["lm_eval_over_prime"] is None
    assert s["our_texts_agree_across_variants"]
    study["summary"] = s
    text = table(study)
    assert "1.40x on prefill-only passes" in text
    assert "| 1.10 (1.00, 1.20) | 30, 30 / 30 / 100 |" in text
