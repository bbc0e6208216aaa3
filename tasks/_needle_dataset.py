"""The lazy dataset of a needle-family task: its grid's cells as Samples, in the evaluated model's tokenizer."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from data_builders import get_source
from data_builders.haystack.assembly import HaystackSource
from longctx_eval import Sample, Tokenizer

Cells = Callable[..., Iterable[Any]]
"""A grid generator `(source, tokenizer, *grid) -> cells`; each cell's `.sample(**metadata)` is a Sample."""


def cell_samples(
    task: str, cells: Cells, tokenizer: Tokenizer | None, source: str, *grid: object
) -> Callable[[], Iterator[Sample]]:
    """Samples of `cells(source, tokenizer, *grid)`, built when called (the task's dataset builder uses the same
    generator, so a built dataset holds exactly these samples)."""

    def samples() -> Iterator[Sample]:
        if tokenizer is None:
            raise ValueError(f"{task} samples are measured in the evaluated model's tokenizer; none was given")
        src: HaystackSource = get_source(source)
        for cell in cells(src, tokenizer, *grid):
            yield cell.sample(source=src.name, source_sha256=src.sha256, tokenizer=tokenizer.name)

    return samples
