"""Low-lexical-overlap needle: the question shares no content word with the needle; an association links them."""

from __future__ import annotations

from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from data_builders.needle.lowlex import lowlex_cells
from data_builders.needle.plans import depth_grid_plan
from longctx_eval import Task, Tokenizer, any_of, between, task

from ._needle_dataset import cell_samples
from ._needle_scoring import family_requests, single_metrics, single_score


@task(
    name="needle_lowlex",
    version="2",
    requires=any_of("generate", "retrieve"),
    default_lengths=[1024, 2048, 4096, 8192],
    description="Needle found by association, not shared words (curated pairs); containment or recall@k",
    bounds={
        "depths": between(1, 101),
        "per_cell": between(1, 1000),
        "reserve": between(0, None),
        "haystacks": between(0, 1000),
    },
    cache_samples=True,  # requests and scores read each Sample alone
)
def needle_lowlex(
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
        "needle_lowlex",
        lowlex_cells,
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
    return Task(
        dataset=samples,
        prompt=family_requests,
        scorer=single_score,
        metrics=single_metrics(),
        primary={"retrieve": "recall@1"},
        slices=("overlap_bucket",),
        cluster_noun="haystacks",
    )
