"""A coreference task's read-out beyond its primary metric, per model and length: the CoNLL family and LEA, then
Span-EM and link recall within one window against across windows, then Span-EM by antecedent distance, then (choice
mode) how a language model ranks the entities offered apart from `[0 new]`.

The main table shows CoNLL F1 only; what a long-document coreference result is about (does a link that crosses a
window survive?) would otherwise be computed and shown nowhere. Each cell carries its n (documents with such links)
and interval as every other cell (`scoring/labels.format_cell`); one page-model table per view, laid out alike by
LEADERBOARD.md and the site.
"""

from __future__ import annotations

from typing import Any

from longctx_eval.leaderboard.page_model import Block, Cell, Table, name_cell, para, text
from longctx_eval.leaderboard.retrieval_table import Board, retrieval_cell
from longctx_eval.metrics.span_em import BUCKETS
from longctx_eval.results import MetricResult, TaskResult
from longctx_eval.scoring.labels import DASH, length_label

SCORES = (("conll_f1", "CoNLL F1"), ("lea_f1", "LEA"), ("span_em", "Span-EM"), ("link_recall", "link recall"))
WINDOWS = (
    ("span_em@intra", "Span-EM intra"),
    ("span_em@cross", "Span-EM cross"),
    ("link_recall@intra", "link recall intra"),
    ("link_recall@cross", "link recall cross"),
)
DISTANCES = tuple((f"span_em@{label}", f"Span-EM {label}") for _, _, label in BUCKETS)
RANKING = (("antecedent_acc", "own entity first"), ("antecedent_chance", "chance"))
VIEWS = (
    (SCORES, "CoNLL F1 and LEA over the document, Span-EM and link recall over its asked anaphors"),
    (
        WINDOWS,
        "within one window (intra) against across windows (cross): the anaphors whose closest antecedent "
        "lies in the same window, and those whose does not",
    ),  # fmt: skip
    (DISTANCES, "Span-EM by the antecedent's distance in tokens"),
    (
        RANKING,
        "ranked by likelihood, the entities offered with [0 new] set aside: how often a mention's own entity "
        "scores highest among the candidates that name a mention, and what a blind pick scores",
    ),  # fmt: skip
)
"""(columns, what the table reads) per view; a view no shown result reports a metric of is left out."""


def is_coref(board: Board) -> bool:
    """Whether the board's results are coreference scores (they report CoNLL F1)."""
    return any(r.metric == "conll_f1" for _, res in board for r in res.results)


HOW = {
    "coref": ("a coreference system's clusters over the gold mentions", None),
    "loglikelihood": ("the candidate antecedent it gave the highest likelihood", "mode=choice"),
    "generate": ("generated N: M answers", "mode=generate"),
}
"""How a coreference result's capability had its model answer, and the task argument that asks for it
(docs/coref.md, "The language-model protocol")."""


def _answered(board: Board) -> list[Any]:
    """'**model** how' per model, '; '-separated: the board may hold a coreference system beside language models,
    and a reader must see which protocol each row used."""
    parts: list[Any] = []
    for i, (name, result) in enumerate(board):
        how, arg = HOW.get(result.capability, (result.capability, None))
        parts += ["; " if i else "", text(name, "strong"), f" {how}"]
        parts += [" (", text(arg, "code"), ")"] if arg else []
    return [*parts, "."]


def _row(result: TaskResult, metric: str, length: int | None) -> MetricResult | None:
    return next(
        (r for r in result.results if r.metric == metric and r.length == length and r.depth is None and not r.slice),
        None,
    )


def coref_section(board: Board, min_n: int) -> list[Block]:
    """One table per view: a row per model and evaluated length, then its pooled row ('all')."""
    if not is_coref(board):
        return []
    out: list[Block] = [para("How each model answered: ", *_answered(board))]
    for columns, what in VIEWS:
        shown = [(m, t) for m, t in columns if any(r.metric == m for _, res in board for r in res.results)]
        if not shown:
            continue
        rows = []
        for name, result in board:
            lengths = sorted({r.length for r in result.results if r.length is not None and r.depth is None})
            for length in [*lengths, None]:
                cells = [retrieval_cell(_row(result, m, length), min_n) for m, _ in shown]
                if all(c.text == DASH for c in cells):
                    continue
                key = length if length is not None else float("inf")
                rows.append((name_cell(name), Cell(length_label(length), key, own=True), *cells))
        out.append(para(f"Coreference {what} (per length, then all lengths pooled; 95% interval over documents, n "
                        f"documents; low n: fewer than {min_n}):"))  # fmt: skip
        out.append(Table(("model", "L", *(t for _, t in shown)), tuple(rows), align="ll" + "r" * len(shown)))
    return out
