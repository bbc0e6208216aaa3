"""Haystacks shared by the samples of a grid: which of a length's haystacks a sample reads, and building the
samples one haystack at a time (its text assembled once) while yielding them in the grid's order.

The needle family and cross_paragraph take a `haystacks` argument: 0 (the default) keeps one haystack per
repetition; h > 0 spreads each length's samples over h haystacks (`spread_haystack`), so a cell's samples are
not all draws on a few texts (`metadata["cluster"]` names the haystack; intervals resample clusters).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
U = TypeVar("U")


def spread_haystack(index: int, rep: int, per_rep: int, reps: int, haystacks: int) -> int:
    """The haystack read by sample `index` (of `per_rep`) of repetition `rep` (of `reps`) of one length: the
    repetition's own when `haystacks` is 0, else (index + start) % haystacks.

    Within a repetition the samples go round the h haystacks, so a haystack's samples are h grid steps apart and
    its depths spread over the grid. A repetition starts where the one before it ended (start = rep * per_rep),
    so a limit, which takes the first repetitions first, reads as many haystacks as it can; when one repetition
    goes round all h by itself, the starts are spread evenly instead (start = rep * h // reps), which keeps each
    haystack's depths apart. Either way the counts per haystack differ by at most one.
    """
    if haystacks <= 0:
        return rep
    start = rep * per_rep if per_rep < haystacks else rep * haystacks // reps
    return (index + start) % haystacks


def by_haystack(items: Sequence[T], haystack: Callable[[T], int], build: Callable[[T], Iterable[U]]) -> Iterator[U]:
    """What `build` makes of each item, in the items' order, built one haystack at a time (in order of first
    appearance): the samples of one haystack are built together, so its text is assembled once (the haystack
    cache, `assembly.haystack_text`, holds a few). Items already grouped by haystack stream as they are built;
    otherwise a built item waits until every earlier one is built."""
    first: dict[int, int] = {}
    for k, item in enumerate(items):
        first.setdefault(haystack(item), k)
    order = sorted(range(len(items)), key=lambda k: first[haystack(items[k])])
    built: dict[int, list[U]] = {}
    ready = 0
    for k in order:
        built[k] = list(build(items[k]))
        while ready in built:
            yield from built.pop(ready)
            ready += 1
