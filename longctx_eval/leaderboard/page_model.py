"""The leaderboard's pages as plain records: sections, paragraphs, tables of typed cells, figures.

`leaderboard/pages.py` builds them once from the merged board (every number and statistic computed there);
`markdown.py` and `site.py` only lay them out, each in its own syntax, and never read each other's output.
Texts are plain (never pre-escaped): each renderer escapes values its own way. A span or cell that is `own`
text of the board (numbers, intervals, states, legends) is written as it is in Markdown; any other is a value
from a run file and is escaped there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Style = Literal["", "code", "strong", "em"]


@dataclass(frozen=True)
class Link:
    """What a span or cell points at, resolved by each renderer: a model, task or comparison page (site only; a
    comparison names its two models, `target` and `other`), a plot or run copy (a path relative to the board)."""

    kind: Literal["model", "task", "compare", "plot", "run"]
    target: str
    other: str = ""


@dataclass(frozen=True)
class Span:
    """A piece of text in one style, optionally linked; `own`: the board's own text, not a run-file value."""

    text: str
    style: Style = ""
    link: Link | None = None
    own: bool = False


@dataclass(frozen=True)
class Para:
    """A paragraph: spans in order; `kind` names its role (legend, leader, note) for the site's styling."""

    spans: tuple[Span, ...]
    kind: str = ""


@dataclass(frozen=True)
class Cell:
    """A table cell: its text (one span), the key it sorts by (None: kept out of sorting), its state mark."""

    text: str
    key: object = None
    mark: str = ""
    style: Style = ""
    link: Link | None = None
    own: bool = False


@dataclass(frozen=True)
class Table:
    """A table: column titles, body rows, foot rows (noise floor, resolvable difference: never sorted) and per
    column 'l' or 'r' alignment; `kind` names it (board, models, breakdown ...)."""

    head: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    kind: str = "breakdown"
    foot: tuple[tuple[Cell, ...], ...] = ()
    align: str = ""

    def aligned(self) -> str:
        """'l' for the first column, 'r' for the rest unless `align` says otherwise."""
        return self.align or "l" + "r" * (len(self.head) - 1)


@dataclass(frozen=True)
class Figure:
    """A plot: its file, alt text and caption; the site links it to its full size."""

    src: Link
    alt: str
    caption: str


@dataclass(frozen=True)
class Bullets:
    """A bulleted list of paragraphs (notes, failures, warnings)."""

    items: tuple[Para, ...]
    kind: str = ""


@dataclass(frozen=True)
class Section:
    """A titled group of blocks; `behind`: what a reader opens when needed (definitions, per-stratum detail: a
    <details> on the site, a section at the end in Markdown)."""

    title: str
    blocks: tuple[Block, ...]
    behind: bool = False


Block = Para | Table | Figure | Bullets | Section


@dataclass(frozen=True)
class Page:
    """One page: its title (with a `version` note beside it), then its blocks, what the reader came for first."""

    title: str
    blocks: tuple[Block, ...]
    version: str = ""
    key: str = ""
    """The task a task page shows ('' for the index)."""


def text(value: str, style: Style = "", link: Link | None = None) -> Span:
    """A run-file value (escaped by each renderer)."""
    return Span(value, style, link)


def own(value: str, style: Style = "") -> Span:
    """The board's own text (numbers, states, rules): written as it is."""
    return Span(value, style, own=True)


_MARK = re.compile(r"\*\*(.+?)\*\*|`([^`]+)`")


def marked(template: str) -> tuple[Span, ...]:
    """The board's own constant text with `**bold**` and `code` marks as spans (never a run-file value)."""
    spans: list[Span] = []
    pos = 0
    for m in _MARK.finditer(template):
        if m.start() > pos:
            spans.append(own(template[pos : m.start()]))
        spans.append(own(m.group(1), "strong") if m.group(1) is not None else own(m.group(2), "code"))
        pos = m.end()
    if pos < len(template):
        spans.append(own(template[pos:]))
    return tuple(spans)


VALUE = "\0"
"""Marks a value inside a sentence built by a shared text function (`with_values` splits on it)."""


def as_value(value: str) -> str:
    """`value` marked as a value inside a sentence, for `with_values`."""
    return f"{VALUE}{value}{VALUE}"


def with_values(sentence: str, style: Style = "") -> tuple[Span, ...]:
    """A sentence whose values were marked by `as_value` as spans: the values as values (in `style`), the rest as
    the board's own text (its `**bold**` and `code` marks as spans)."""
    spans: list[Span] = []
    for i, piece in enumerate(sentence.split(VALUE)):
        if piece:
            spans += [Span(piece, style)] if i % 2 else marked(piece)
    return tuple(spans)


def para(*pieces: Span | str | tuple[Span, ...], kind: str = "") -> Para:
    """A paragraph from spans, own plain strings and span tuples, in order."""
    spans: list[Span] = []
    for p in pieces:
        if isinstance(p, str):
            spans.append(own(p))
        elif isinstance(p, Span):
            spans.append(p)
        else:
            spans.extend(p)
    return Para(tuple(spans), kind)


def name_cell(name: str) -> Cell:
    """A model's name as a table's first cell: bold, linked to its page on the site."""
    return Cell(name, name, style="strong", link=Link("model", name))


def tables_of(blocks: tuple[Block, ...] | list[Block]) -> list[Table]:
    """Every table among `blocks`, sections opened, in page order (the renderers' equality test reads it)."""
    found: list[Table] = []
    for b in blocks:
        if isinstance(b, Table):
            found.append(b)
        elif isinstance(b, Section):
            found += tables_of(b.blocks)
    return found
