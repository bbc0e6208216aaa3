"""The comparison pages as page-model records: two models' paired differences per task, computed once here.

A pair of models gets a page when they share a paired sample on some board (`scoring/paired_scores.py`: the same
sample id *and* design, only for the result the board shows); p and Holm p as `longctx-eval compare` decides
(`scoring/comparison.holm_rows`). The site lays these pages out; LEADERBOARD.md has no equivalent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from longctx_eval.leaderboard.grid import primary_metric, task_names, task_of
from longctx_eval.leaderboard.page_model import Block, Bullets, Cell, Link, Page, Section, Table, marked, para, text
from longctx_eval.metrics.bootstrap import MIN_N_FOR_INTERVAL
from longctx_eval.metrics.cluster_stats import count_text
from longctx_eval.results import RunResult, TaskResult
from longctx_eval.scoring.comparison import holm_rows, is_significant, p_text
from longctx_eval.scoring.labels import length_label
from longctx_eval.scoring.paired_aggregate import paired_join, paired_rows
from longctx_eval.scoring.paired_scores import Join, PairedDifference, PairKey, SampleScore
from longctx_eval.scoring.paired_tests import CLUSTER_SWAP, TESTS

Samples = Mapping[str, Mapping[str, Mapping[PairKey, SampleScore]]]
"""Per model name and board: its per-sample scores (from run folders' scores/)."""


@dataclass(frozen=True)
class BoardComparison:
    """One board of a comparison: the primary score field compared, the join (pairs, refused and unpaired ids),
    its paired differences (per length, then pooled; none when nothing could be paired) and their Holm p."""

    metric: str
    joined: Join
    diffs: list[PairedDifference]
    holm: list[float]


Comparison = dict[str, BoardComparison]
"""Per board, what two models' comparison found."""

INTRO = (
    "Paired differences (A minus B) of each task's primary score, over the samples both models scored with the "
    "same context (same sample id and the same haystack: a sample built in another tokenizer is never paired). "
    "Pairs: how many, and over how many clusters (the haystacks or documents they were built from) when they "
    "share some. Interval: 95% percentile bootstrap over the clusters, then the pairs within them (2000 "
    f"resamples, seeded; none under {MIN_N_FOR_INTERVAL} pairs or from one cluster). p: the paired test's "
    "two-sided p-value, the test named per row (a sign-flip test of the per-cluster summed differences where "
    "pairs share clusters; else McNemar's exact test for 0/1 scores, a sign-flip permutation test otherwise); "
    "Holm p: adjusted by Holm's correction across every cell of this page (a one-length task's pooled row "
    "repeats its cell); **significant** when Holm p < 0.05, as `longctx-eval compare` decides. Better: samples "
    "where one scored higher; for a score computed over a whole document's answers (CoNLL F1, the "
    f"{CLUSTER_SWAP} rows), clusters where one scored higher on that cluster alone, shown as such."
)


def comparisons(entries: Sequence[RunResult], samples: Samples) -> dict[tuple[str, str], Comparison]:
    """Every pair of models (names sorted) with a paired sample on some board, its differences and Holm p."""
    names = sorted(name for name in samples if samples[name])
    boards = task_names(entries)
    metrics = {board: primary_metric(board, entries) for board in boards}
    out: dict[tuple[str, str], Comparison] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            found: dict[str, tuple[str, Join, list[PairedDifference]]] = {}
            for board in boards:
                sa, sb, metric = samples[a].get(board), samples[b].get(board), metrics[board]
                if sa and sb and metric:
                    # as `compare`: its refused and unpaired ids are counted; CoNLL F1 recomputed on each side
                    joined, aggregate = paired_join(sa, sb, metric, _shown(entries, a, board))
                    diffs = paired_rows(sa, sb, metric, aggregate, joined.pairs)
                    if diffs or joined.refused:
                        found[board] = (metric, joined, diffs)
            if any(diffs for _, _, diffs in found.values()):  # a page for models that share some pair
                adjusted = holm_rows([diffs for _, _, diffs in found.values()])
                out[(a, b)] = {
                    board: BoardComparison(metric, joined, diffs, holm)
                    for (board, (metric, joined, diffs)), holm in zip(found.items(), adjusted, strict=True)
                }
    return out


def _shown(entries: Sequence[RunResult], model: str, board: str) -> TaskResult | None:
    """The result `model` shows on `board` (its task's metric definitions come from it)."""
    entry = next((e for e in entries if e.model.name == model), None)
    return task_of(entry, board) if entry is not None else None


def compare_page(a: str, b: str, boards: Comparison) -> Page:
    """A vs B: per task, A - B of the primary score on the samples both scored, per length and pooled."""
    blocks: list[Block] = [
        para("A = ", text(a, "strong", Link("model", a)), ", B = ", text(b, "strong", Link("model", b)), "."),
        summary_table(a, b, boards),
    ]
    head = ("length", "pairs", a, b, "difference", "significant", f"{a} better", f"{b} better", "test", "p", "Holm p")
    for board, c in boards.items():
        found: list[Block] = [
            para(
                "Score: ",
                text(c.metric, "code"),
                ". ",
                text(join_counts(c.joined, a, b)),
                " (",
                text("task page", link=Link("task", board)),
                ")",
            )
        ]
        if c.diffs:
            rows = tuple(_row(d, holm_p) for d, holm_p in zip(c.diffs, c.holm, strict=True))
            found += [para(tests_used(c.diffs)), Table(head, rows, "compare", align="lrrrrlrrlrr")]
        blocks.append(Section(board, tuple(found)))
    blocks.append(Section("Definitions", (para(marked(INTRO), kind="legend"),), behind=True))
    return Page(f"{a} vs {b}", tuple(blocks), key=f"{a} vs {b}")


def summary_table(a: str, b: str, boards: Comparison) -> Table:
    """The page's answer first: per task the pooled difference A - B, its Holm p and whether it is significant."""
    rows = []
    for board, c in boards.items():
        pooled = next(((d, p) for d, p in zip(c.diffs, c.holm, strict=True) if d.length is None), None)
        if pooled is None:
            rows.append(
                (
                    Cell(board, board, link=Link("task", board)),
                    Cell(c.metric, c.metric, style="code"),
                    *(Cell("no pair", own=True),) * 4,
                )
            )
            continue
        d, holm_p = pooled
        significant = is_significant(holm_p)
        rows.append(
            (
                Cell(board, board, link=Link("task", board)),
                Cell(c.metric, c.metric, style="code"),
                Cell(f"{d.n}{_over_clusters(d)}", d.n, own=True),
                Cell(f"{d.difference:+.3f} {pair_interval(d)}", d.difference, own=True),
                Cell(p_text(holm_p), holm_p, own=True),
                Cell("yes" if significant else "no", int(significant), own=True),
            )
        )
    head = ("task", "score", "pairs", f"{a} - {b}, all lengths", "Holm p", "significant")
    return Table(head, tuple(rows), "summary", align="llrrrl")


def _row(d: PairedDifference, holm_p: float) -> tuple[Cell, ...]:
    significant = is_significant(holm_p)
    return (
        Cell(length_label(d.length), d.length if d.length is not None else float("inf"), own=True),
        Cell(f"{d.n}{_over_clusters(d)}", d.n, own=True),
        Cell(f"{d.mean_a:.3f}", d.mean_a, own=True),
        Cell(f"{d.mean_b:.3f}", d.mean_b, own=True),
        Cell(f"{d.difference:+.3f} {pair_interval(d)}", d.difference, own=True),
        Cell("yes" if significant else "no", int(significant), own=True),
        Cell(_better(d.a_better, d), d.a_better, own=True),
        Cell(_better(d.b_better, d), d.b_better, own=True),
        Cell(d.test, d.test),
        Cell(p_text(d.p_value), d.p_value, own=True),
        Cell(p_text(holm_p), holm_p, own=True),
    )


def _better(count: int, d: PairedDifference) -> str:
    """How many favour one side: samples, or for a whole-cluster score (cluster-swap rows) clusters, said so."""
    return f"{count} cluster{'s' if count != 1 else ''}" if d.test == CLUSTER_SWAP else str(count)


def _over_clusters(d: PairedDifference) -> str:
    """' over 2 clusters' when a comparison row's pairs share clusters, else ''."""
    shared = d.clusters is not None and d.clusters < d.n
    return f" over {count_text(d.clusters or 0)}" if shared else ""


def join_counts(joined: Join, a: str, b: str) -> str:
    """What `longctx-eval compare` prints of a join: '40 pairs; 2 refused: <why>; unpaired: 3 only in A, 0 only
    in B' (ids of another design are refused, never paired; unpaired ids were scored by one model only)."""
    refused = "; ".join(f"{n} refused: {why}" for why, n in joined.refused.items()) or "0 refused"
    pairs = f"{len(joined.pairs)} pairs" if joined.pairs else "no pair"
    return f"{pairs}; {refused}; unpaired: {joined.only_a} only in {a}, {joined.only_b} only in {b}."


def tests_used(diffs: Sequence[PairedDifference]) -> str:
    """The paired tests a board's rows used (each row names its own in the test column), each defined."""
    used = dict.fromkeys(d.test for d in diffs)
    return "Test per length: " + "; ".join(f"{t} = {TESTS.get(t, t)}" for t in used) + "."


def pair_interval(d: PairedDifference) -> str:
    """A row's interval, never one from fewer than MIN_N_FOR_INTERVAL pairs (then the no-interval text)."""
    return (d if d.n >= MIN_N_FOR_INTERVAL else replace(d, ci95=None)).interval_text()


def comparison_list(pairs: Sequence[tuple[str, str]], model: str | None = None) -> list[Block]:
    """The comparisons a page links to (every pair on the index, a model's own on its page), or nothing."""
    shown = sorted(p for p in pairs if model is None or model in p)
    if not shown:
        return []
    items = tuple(para(text(f"{x} vs {y}", link=Link("compare", x, y))) for x, y in shown)
    intro = para("Paired differences on the samples both models scored.")
    return [Section("Comparisons", (intro, Bullets(items, "comparisons")))]
