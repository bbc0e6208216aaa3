"""Needle recall: one needle sentence with a random value at a chosen depth of a haystack of exact length."""

from __future__ import annotations

from collections.abc import Iterator

from data_builders import get_source
from data_builders.needle_grid import needle_cells
from longctx_eval import Sample, Task, Tokenizer, any_of, task

from ._needle_scoring import single_metrics, single_request, single_score


@task(
    name="needle",
    version="4",
    requires=any_of("generate", "retrieve"),
    default_lengths=[1024, 2048, 4096, 8192],
    description="Single needle (number, word or UUID value), length x depth grid; containment or recall@k",
)
def needle(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    depths: int = 5,
    per_cell: int = 1,
    source: str = "austen",
) -> Task:
    def samples() -> Iterator[Sample]:
        if tokenizer is None:
            raise ValueError("needle samples are measured in the evaluated model's tokenizer; none was given")
        src = get_source(source)
        # The `needle` dataset builder uses the same cells: a built dataset holds exactly these samples.
        for cell in needle_cells(src, tokenizer, lengths, depths, per_cell, seed):
            yield cell.sample(source=src.name, source_sha256=src.sha256, tokenizer=tokenizer.name)

    return Task(
        dataset=samples,
        prompt=single_request,
        scorer=single_score,
        metrics=single_metrics(),
        primary={"retrieve": "recall@1"},
        slices=("value_kind", "overlap_bucket"),
    )
