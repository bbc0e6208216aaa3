"""The lazy dataset of a needle-family task: its grid planned first, then the chosen cells built as Samples in
the evaluated model's tokenizer (`longctx_eval.sample_plan`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from data_builders import get_source
from data_builders.haystack.assembly import HaystackSource
from data_builders.needle.plans import GridPlan
from longctx_eval import Sample, Tokenizer
from longctx_eval.sample_plan import Planned, PlannedDataset

Cells = Callable[..., Iterable[Any]]
"""A grid generator `(source, tokenizer, *grid, only=ids) -> cells`; each cell's `.sample(**metadata)` is a Sample."""


def cell_samples(
    task: str, cells: Cells, plan: GridPlan, tokenizer: Tokenizer | None, source: str, *grid: object
) -> PlannedDataset:
    """The grid `plan(*grid)`, and the Samples of `cells(source, tokenizer, *grid)` for the entries chosen from
    it (the task's dataset builder uses the same generator, so a built dataset holds exactly these samples)."""

    def build(chosen: Sequence[Planned]) -> Iterator[Sample]:
        if tokenizer is None:
            raise ValueError(f"{task} samples are measured in the evaluated model's tokenizer; none was given")
        src: HaystackSource = get_source(source)
        for cell in cells(src, tokenizer, *grid, only={p.id for p in chosen}):
            yield cell.sample(source=src.name, source_sha256=src.sha256, tokenizer=tokenizer.name)

    return PlannedDataset(plan=lambda: plan(*grid), build=build)
