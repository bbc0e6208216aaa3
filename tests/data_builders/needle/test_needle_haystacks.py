"""The needle family's `haystacks` argument: the default grids are what they were (hashes taken before the
argument existed), and h > 0 spreads a length's samples over h haystacks, each carrying a spread of depths,
with the plan equal to what is built and a limit spread over the haystacks."""

from __future__ import annotations

from collections import defaultdict

import pytest

from longctx_eval.discovery import discover
from longctx_eval.hashing import sha256_json
from longctx_eval.run.config import TaskPlan
from longctx_eval.run.plan_samples import plan_samples
from longctx_eval.run.sample_cache import SampleCache
from longctx_eval.run.sampling import dataset_hash

# (args, lengths) -> (dataset_hash, sha256 of the ids), built on the synthetic source in MiniLM's tokenizer with
# seed 0 by the code before `haystacks` came to the depth grids (multivalue/multiquery: before the builds went
# one haystack at a time).
DEFAULTS = {
    "needle": (
        {"depths": 5, "per_cell": 2},
        [512, 1024],
        "7711491b9f4dc290989cedb77aa9c6ad1954903212877c14fc136e1963f9b3ab",
        "1aa8efc9e60d011160470060fb20d5c52938841e989a4ce9059a3f0136d3f00a",
    ),
    "needle_multikey": (
        {"depths": 5, "per_cell": 2},
        [512, 1024],
        "fd74e2042c6817118b796386960f5b59464ffdbcf0a9d9c26ddc154b32bc6695",
        "1aa8efc9e60d011160470060fb20d5c52938841e989a4ce9059a3f0136d3f00a",
    ),
    "needle_lowlex": (
        {"depths": 5, "per_cell": 2},
        [512, 1024],
        "b31279bc09b62d7df3d10e9cd0056aa1d77934054a19fa777c9f9831db5e0f92",
        "1aa8efc9e60d011160470060fb20d5c52938841e989a4ce9059a3f0136d3f00a",
    ),
    "needle_multivalue": (
        {"per_length": 4},
        [640, 1024],
        "4cd317818f367dc5443f8016fa4244b0af8666f58961e8f11d73ad8cf4db1897",
        "cbd559846e4047375abb725fce8b6bdaaa45bab49b9cdb5bbc880e03140f3f5a",
    ),
    "needle_multiquery": (
        {"per_length": 4},
        [512, 1024],
        "a41235a2b17de6a3fd01587d91da76530dad1f904ca40609935fc3c284592839",
        "d893891ae93fcf63834c90b83d8494242f8c67bac2bba5d97697e55e48af9baa",
    ),
    "needle_multivalue?haystacks=2": (
        {"per_length": 4, "haystacks": 2},
        [640, 1024],
        "5a4af8b5353c6628d929841352ede39a52007e784608079827e3f4006614be3f",
        "cbd559846e4047375abb725fce8b6bdaaa45bab49b9cdb5bbc880e03140f3f5a",
    ),
    "needle_multiquery?haystacks=2": (
        {"per_length": 4, "haystacks": 2},
        [512, 1024],
        "b4914a097c6525b8086c7ffb0ef67bdd5b1df8a1bd91f30e70c9bfe8d1137fe0",
        "d893891ae93fcf63834c90b83d8494242f8c67bac2bba5d97697e55e48af9baa",
    ),
}

# The reference suite's shapes at a short length: depth grids 25 x 4 and 25 x 2, per-length grids, 20 haystacks.
SPREAD = {
    "needle": ({"depths": 25, "per_cell": 4, "haystacks": 20}, 512, 100),
    "needle_multikey": ({"depths": 25, "per_cell": 2, "haystacks": 20}, 640, 50),
    "needle_lowlex": ({"depths": 25, "per_cell": 2, "haystacks": 20}, 512, 50),
    "needle_multivalue": ({"per_length": 40, "haystacks": 20}, 640, 40),
    "needle_multiquery": ({"per_length": 40, "haystacks": 20}, 512, 40),
}


@pytest.fixture(scope="module")
def registry():
    return discover()


def _task(registry, name, args, lengths, tokenizer, seed=0):
    return registry.get(name).build({**args, "source": "synthetic"}, lengths=lengths, seed=seed, tokenizer=tokenizer)


@pytest.mark.parametrize("key", sorted(DEFAULTS))
def test_the_default_grids_are_unchanged(registry, key, minilm_tokenizer):
    args, lengths, want_hash, want_ids = DEFAULTS[key]
    samples = list(_task(registry, key.split("?")[0], args, lengths, minilm_tokenizer).samples())
    assert sha256_json([s.id for s in samples]) == want_ids
    assert dataset_hash(samples) == want_hash


@pytest.mark.parametrize("name", sorted(SPREAD))
def test_haystacks_spread_a_length_over_that_many_balanced_haystacks(registry, name, minilm_tokenizer):
    args, length, n = SPREAD[name]
    task = _task(registry, name, args, [length], minilm_tokenizer)
    plan = list(task.dataset.plan())
    samples = list(task.samples())
    assert len(samples) == n
    # planned == built: the same ids, in order, on the same haystacks
    assert [(p.id, p.metadata["cluster"]) for p in plan] == [(s.id, s.metadata["cluster"]) for s in samples]
    held = defaultdict(list)
    for s in samples:
        held[s.metadata["cluster"]].append(s)
    assert len(held) == 20
    sizes = [len(v) for v in held.values()]
    assert max(sizes) - min(sizes) <= 1
    contexts = {s.metadata["cluster"]: s.context[:200] for s in samples if s.metadata.get("depth", 1) > 0.1}
    assert len(set(contexts.values())) == len(contexts)  # distinct texts, not one haystack under 20 names
    if "depths" in args:
        assert sorted({s.metadata["depth"] for s in samples}) == sorted({p.metadata["depth"] for p in plan})
        assert len({s.metadata["depth"] for s in samples}) == 25  # the whole depth grid
        for on_one in held.values():
            depths = sorted(s.metadata["depth"] for s in on_one)
            assert depths[-1] - depths[0] >= 0.4, depths  # each haystack carries a spread of depths


def test_keys_values_and_depths_do_not_depend_on_haystacks(registry, minilm_tokenizer):
    args = {"depths": 5, "per_cell": 2}
    alone = list(_task(registry, "needle_multikey", args, [512], minilm_tokenizer).samples())
    spread = list(_task(registry, "needle_multikey", {**args, "haystacks": 4}, [512], minilm_tokenizer).samples())

    def needles(s):
        return [(n["key"], n["value"], n["depth"]) for n in s.gold["needles"]]

    assert [(s.id, s.question, needles(s)) for s in alone] == [(s.id, s.question, needles(s)) for s in spread]
    assert len({s.metadata["cluster"] for s in alone}) == 2 and len({s.metadata["cluster"] for s in spread}) == 4
    assert [s.context for s in alone] != [s.context for s in spread]


def test_spread_grids_are_deterministic_under_a_seed(registry, minilm_tokenizer):
    args = {"depths": 5, "per_cell": 2, "haystacks": 4}
    once = list(_task(registry, "needle", args, [512], minilm_tokenizer).samples())
    again = list(_task(registry, "needle", args, [512], minilm_tokenizer).samples())
    other = list(_task(registry, "needle", args, [512], minilm_tokenizer, seed=1).samples())
    assert dataset_hash(once) == dataset_hash(again) != dataset_hash(other)
    assert {s.metadata["cluster"] for s in once}.isdisjoint({s.metadata["cluster"] for s in other})


@pytest.mark.parametrize(("limit", "clusters"), [(10, 10), (25, 20), (50, 20)])
def test_a_limit_spreads_over_the_haystacks(registry, limit, clusters, minilm_tokenizer):
    """Through the runner's planning (`plan_samples`): one depth each before any repeats, on distinct haystacks."""
    args = {"depths": 25, "per_cell": 4, "haystacks": 20, "source": "synthetic"}
    plan = TaskPlan(registry.get("needle"), (512,), limit, args)
    got = plan_samples(plan, 0, minilm_tokenizer, SampleCache(None, 0)).samples
    assert len(got) == limit
    assert len({s.metadata["cluster"] for s in got}) == clusters
    assert len({s.metadata["depth"] for s in got}) == min(limit, 25)
