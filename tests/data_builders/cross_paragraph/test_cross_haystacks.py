"""cross_paragraph's `haystacks` argument: the default grid is what it was (a hash taken before the argument
existed), and h > 0 spreads a length's pairs over h haystacks, a pair's two placements on one, planned as built."""

from __future__ import annotations

from collections import defaultdict

import pytest

from longctx_eval.discovery import discover
from longctx_eval.hashing import sha256_json
from longctx_eval.run.sampling import choose, dataset_hash


def _task(args, lengths, tokenizer, seed=0):
    info = discover().get("cross_paragraph")
    return info.build({**args, "source": "synthetic"}, lengths=lengths, seed=seed, tokenizer=tokenizer)


def test_the_default_grid_is_unchanged(minilm_tokenizer):
    """per_cell=2 at 1K and 2K on the synthetic source, MiniLM's tokenizer, seed 0, built before `haystacks`."""
    samples = list(_task({"per_cell": 2}, [1024, 2048], minilm_tokenizer).samples())
    assert sha256_json([s.id for s in samples]) == "62e1526d549d260b0a1fbc277ad06c2847e03955eec17de382f30c0ff45dd622"
    assert dataset_hash(samples) == "762cfeb34a76f3f3a56fcf5ce9a98568f7a2162bef14252b30da9280a82dbc6f"


def test_haystacks_spread_the_pairs_and_keep_each_pair_on_one(minilm_tokenizer):
    task = _task({"per_cell": 5, "haystacks": 20}, [2048], minilm_tokenizer)
    plan = list(task.dataset.plan())
    samples = list(task.samples())
    assert [(p.id, p.metadata["cluster"]) for p in plan] == [(s.id, s.metadata["cluster"]) for s in samples]
    assert len(samples) == 60  # 2 distances fit 2K: 2 x 3 hops x 2 placements x 5 repetitions
    pairs = defaultdict(set)
    held = defaultdict(set)
    for s in samples:
        pairs[s.metadata["pair"]].add(s.metadata["cluster"])
        held[s.metadata["cluster"]].add(s.metadata["pair"])
    assert all(len(c) == 1 for c in pairs.values())  # a cross sample and its control share their haystack
    assert len(held) == 20
    assert {len(p) for p in held.values()} <= {1, 2}  # 30 pairs over 20 haystacks: balanced
    # the chains do not depend on `haystacks` (only a chain naming a word of its new haystack is redrawn)
    alone = list(_task({"per_cell": 5}, [2048], minilm_tokenizer).samples())
    same = sum(a.id == b.id and a.question == b.question for a, b in zip(alone, samples, strict=True))
    assert same >= 0.9 * len(samples)


def test_a_spread_grid_is_deterministic(minilm_tokenizer):
    args = {"per_cell": 2, "haystacks": 3, "hops": "2,3"}
    once = list(_task(args, [1024], minilm_tokenizer).samples())
    assert dataset_hash(once) == dataset_hash(list(_task(args, [1024], minilm_tokenizer).samples()))
    assert dataset_hash(once) != dataset_hash(list(_task(args, [1024], minilm_tokenizer, seed=1).samples()))


@pytest.mark.parametrize("length", [1024, 2048, 4096])
def test_smollm2s_limited_cells_read_at_least_20_haystacks(length):
    """The reference's SmolLM2 cells: 17 repetitions on 20 haystacks, a limit of 100 a length (plans only)."""
    info = discover().get("cross_paragraph")
    task = info.build({"per_cell": 17, "haystacks": 20}, lengths=[length], seed=0, tokenizer=None)
    chosen, _ = choose(info, list(task.dataset.plan()), 100)
    assert len(chosen) == 100
    assert len({p.metadata["cluster"] for p in chosen}) == 20
