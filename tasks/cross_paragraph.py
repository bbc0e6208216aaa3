"""Cross-paragraph fact recall: answers that need a chain of 2-4 facts placed in different paragraphs.

"Dalia Ferrow works for Quillmark Systems." ... "Quillmark Systems is based in Tarnholt." -> "In which city
does Dalia Ferrow work?" -> "Tarnholt". Each chain is asked twice on one haystack: its facts in successive
paragraphs a controlled token distance apart (`cross`), and as adjacent sentences of one paragraph (`same`),
with look-alike distractor facts at the same places in both. See docs/cross_paragraph.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from data_builders import get_source
from data_builders.cross_paragraph.grid import (
    DISTANCE_LADDER,
    RETRIEVAL_PRIMARY_K,
    cross_cells,
    cross_plan,
    distances_for,
    int_list,
)
from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from longctx_eval import Sample, Task, Tokenizer, any_of, between, contrast, curve, task
from longctx_eval.sample_plan import Planned, PlannedDataset

from ._cross_paragraph_scoring import RETRIEVAL_PRIMARY, ask, cross_metrics, cross_oracle, cross_score, distance_field


@task(
    name="cross_paragraph",
    version="1",
    requires=any_of("generate", "retrieve"),
    default_lengths=[2048, 4096, 8192],
    description="Chains of 2-4 facts across paragraphs (or in one), distance-controlled, with look-alike distractors",
    bounds={"per_cell": between(1, 1000), "reserve": between(0, None), "haystacks": between(0, 1000)},
    cache_samples=True,  # requests and scores read each Sample alone
)
def cross_paragraph(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    hops: str = "2,3,4",
    distances: str = "",
    per_cell: int = 1,
    reserve: int = PROMPT_RESERVE,
    source: str = "austen",
    haystacks: int = 0,
) -> Task:
    """`hops`: chain lengths to build; `distances`: target tokens between consecutive facts (default: the
    ladder 128, 256, 512, ... cut to what fits each length); `reserve`: tokens of each length left for the
    prompt around the context (the context is length - reserve tokens); `haystacks`: 0 (the default) gives every
    pair of one repetition the same haystack, h > 0 spreads each length's pairs over h haystacks (a pair's cross
    sample and its control always share one; `sharing.spread_haystack`)."""
    hop_counts = int_list(hops, "cross_paragraph.hops")
    ladder = int_list(distances, "cross_paragraph.distances") or DISTANCE_LADDER
    used = sorted({d for n in lengths for d in distances_for(n, max(hop_counts, default=4), reserve, ladder)})

    def build(chosen: Sequence[Planned]) -> Iterator[Sample]:
        if tokenizer is None:
            raise ValueError("cross_paragraph samples are measured in the evaluated model's tokenizer; none was given")
        src = get_source(source)
        # The `cross_paragraph` dataset builder uses the same cells: a built dataset holds exactly these samples.
        ids = {p.id for p in chosen}
        cells = cross_cells(src, tokenizer, lengths, hop_counts, per_cell, seed, reserve, ladder, haystacks, only=ids)
        for cell in cells:
            yield cell.sample(source=src.name, source_sha256=src.sha256, tokenizer=tokenizer.name)

    samples = PlannedDataset(lambda: cross_plan(lengths, hop_counts, per_cell, seed, reserve, ladder, haystacks), build)
    buckets = [0, *used]
    return Task(
        dataset=samples,
        prompt=ask,
        scorer=cross_score,
        metrics=cross_metrics(),
        primary={"retrieve": RETRIEVAL_PRIMARY},
        slices=("hops", "distance_bucket", "placement"),
        curves=[
            curve(
                "recall_vs_distance",
                [distance_field(d) for d in buckets],
                buckets,
                x_label="target tokens between consecutive facts (0: same paragraph)",
                y_label=f"score (generation) or all_facts@{RETRIEVAL_PRIMARY_K} (retrieval)",
            )
        ],
        contrasts=[
            contrast("cross_paragraph_drop", "score", "placement", "same", "cross"),
            contrast("cross_paragraph_drop_retrieval", RETRIEVAL_PRIMARY, "placement", "same", "cross"),
        ],
        oracle=cross_oracle,
        cluster_noun="haystacks",
    )
