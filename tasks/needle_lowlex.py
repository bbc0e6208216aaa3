"""Low-lexical-overlap needle: the question shares no content word with the needle; an association links them."""

from __future__ import annotations

from collections.abc import Iterator

from data_builders import get_source
from data_builders.needle_lowlex import lowlex_cells
from longctx_eval import Sample, Task, Tokenizer, any_of, task

from ._needle_scoring import family_requests, single_metrics, single_score


@task(
    name="needle_lowlex",
    version="1",
    requires=any_of("generate", "retrieve"),
    default_lengths=[1024, 2048, 4096, 8192],
    description="Needle found by association, not shared words (curated pairs); containment or recall@k",
)
def needle_lowlex(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    depths: int = 5,
    per_cell: int = 1,
    source: str = "austen",
) -> Task:
    def samples() -> Iterator[Sample]:
        if tokenizer is None:
            raise ValueError("needle_lowlex samples are measured in the evaluated model's tokenizer; none was given")
        src = get_source(source)
        # The `needle_lowlex` dataset builder uses the same cells.
        for cell in lowlex_cells(src, tokenizer, lengths, depths, per_cell, seed):
            yield cell.sample(source=src.name, source_sha256=src.sha256, tokenizer=tokenizer.name)

    return Task(
        dataset=samples,
        prompt=family_requests,
        scorer=single_score,
        metrics=single_metrics(),
        primary={"retrieve": "recall@1"},
        slices=("overlap_bucket",),
    )
