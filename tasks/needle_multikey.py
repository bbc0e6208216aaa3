"""Multi-key needle: the target needle among distractor needles with similar keys; name the target's value."""

from __future__ import annotations

from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from data_builders.needle.multikey import multikey_cells
from data_builders.needle.plans import depth_grid_plan
from longctx_eval import Prediction, Sample, Score, Task, Tokenizer, any_of, between, contains_answer, rate, task

from ._needle_dataset import cell_samples
from ._needle_scoring import family_requests, single_metrics, single_score


def multikey_score(sample: Sample, pred: Prediction) -> Score:
    """The target's value as the needle task scores it, plus `distractor`: the answer names a distractor's value."""
    score = single_score(sample, pred)
    if pred.text is None and pred.status == "ok":
        return score
    text = pred.text or ""
    distractor = any(contains_answer(text, d) for d in sample.gold["distractors"])
    return Score({**score.values, "distractor": float(distractor)}, parsed=score.parsed)


@task(
    name="needle_multikey",
    version="2",
    requires=any_of("generate", "retrieve"),
    default_lengths=[1024, 2048, 4096, 8192],
    description="Target needle among 3 distractor needles with similar keys; containment or recall@k",
    bounds={
        "depths": between(1, 101),
        "per_cell": between(1, 1000),
        "reserve": between(0, None),
        "haystacks": between(0, 1000),
    },
    cache_samples=True,  # requests and scores read each Sample alone
)
def needle_multikey(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    depths: int = 5,
    per_cell: int = 1,
    reserve: int = PROMPT_RESERVE,
    source: str = "austen",
    haystacks: int = 0,
) -> Task:
    """`haystacks`: 0 (the default) gives every depth of one repetition the same haystack; h > 0 spreads each
    length's samples over h haystacks, each carrying depths spread over the grid (`sharing.spread_haystack`)."""
    samples = cell_samples(
        "needle_multikey",
        multikey_cells,
        depth_grid_plan,
        tokenizer,
        source,
        lengths,
        depths,
        per_cell,
        seed,
        reserve,
        haystacks,
    )
    score, exact, empty, *retrieval = single_metrics()
    return Task(
        dataset=samples,
        prompt=family_requests,
        scorer=multikey_score,
        metrics=[score, rate("distractor"), exact, empty, *retrieval],
        primary={"retrieve": "recall@1"},
        slices=("value_kind", "overlap_bucket"),
        cluster_noun="haystacks",
    )
