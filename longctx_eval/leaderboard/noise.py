"""A task's noise floor and resolvable difference on the leaderboard, from the task's design and the cells' n.

Noise floor: the score of a baseline that reads nothing (as MRCR v2 publishes its random baseline):

- generation tasks of the needle family and cross_paragraph score containment of a random value (a 7-digit
  number, an adjective-noun pair, a UUID, a named entity) in the reply: an empty answer scores exactly 0;
  needle_multikey plants the target and 3 look-alike keys, so replying with one of the 4 planted values at
  random scores 1/4;
- retrieval over an L-token context cut into chunks of at most 128 tokens (the needle family's, cross_paragraph's
  and retrieval's `RetrievalParams`) has C >= ceil(L / 128) chunks; a retriever ranking them at random puts a
  given chunk in its top k with chance k / C, so recall@k (a share of gold spans), fact_recall@k and all_facts@k
  (every fact in the top k) are at most min(1, k / ceil(L / 128)): an upper bound, since sentence-aware chunks
  are often shorter than 128 tokens and overlap, which only makes C larger;
- other tasks (coreference, posprobe) have no closed form here and show none.

Resolvable difference at n samples per cell: 1.96 * sqrt(0.25 / n_a + 0.25 / n_b), the half-width of the 95%
interval of the difference of two independent means of 0-1 scores at the widest case (a 0-1 score's per-sample
variance is at most 0.25, reached by a rate at p = 0.5). Two cells closer than this cannot be told apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from longctx_eval.results import MetricResult, TaskResult
from longctx_eval.scoring.labels import DASH

Z95 = 1.959964
"""The two-sided 95% normal quantile."""
MAX_VARIANCE = 0.25
"""The largest per-sample variance of a score in [0, 1] (a rate at p = 0.5)."""
CHUNK_TOKENS = 128
"""The most tokens in one retrieval chunk of the tasks in CHUNKED_TASKS (their RetrievalParams.chunk_tokens)."""
CHUNKED_TASKS = frozenset(
    {
        "needle",
        "needle_lowlex",
        "needle_multikey",
        "needle_multiquery",
        "needle_multivalue",
        "cross_paragraph",
        "retrieval",
    }
)
"""Tasks whose retrievers read CHUNK_TOKENS-token chunks.

tests/leaderboard/test_leaderboard_honesty.py checks each task."""
CONTAINMENT_TASKS = frozenset(
    {"needle", "needle_lowlex", "needle_multikey", "needle_multiquery", "needle_multivalue", "cross_paragraph"}
)
"""Generation tasks scored by containment of a random value in the reply: an empty answer scores 0."""
CONTAINMENT_METRICS = frozenset({"score", "exact", "all_found"})
KEYED_NEEDLES = {"needle_multikey": 4}
"""Tasks that plant look-alike keys: the target plus its distractors (data_builders.needle.multikey.DISTRACTORS)."""
RANKED_METRIC = re.compile(r"^(?:recall|all_facts|fact_recall)@(\d+)$")

FLOOR_LEGEND = (
    "**noise floor**: the score of a baseline that reads nothing, from the task's design. Generation (needle "
    "family, cross_paragraph): an empty answer scores 0 (the score is containment of a random value: a 7-digit "
    "number, an adjective-noun pair, a UUID, an entity); needle_multikey: 0.25, one of its 4 planted values (the "
    "target and 3 look-alike keys) at random. Retrieval: a retriever ranking the context's chunks at random; an "
    "L-token context has at least ceil(L/128) chunks of at most 128 tokens, so `recall@k`, `fact_recall@k` and "
    "`all_facts@k` are at most (`<=`) min(1, k/ceil(L/128)) (more, shorter chunks only lower it); the **all** "
    "cell weighs each length by its n. Coreference and posprobe: none (no closed form). **resolvable "
    "difference**: 1.96 x sqrt(0.25/n + 0.25/n) at the column's smallest n, the half-width of the 95% interval "
    "of the difference of two independent cells of n samples at the widest case (a 0-1 score's per-sample "
    "variance is at most 0.25, a rate at p = 0.5): cells closer than this cannot be told apart (n=30: 0.25, "
    'n=100: 0.14, n=500: 0.06; "none" at n=1, where it exceeds 1); a paired comparison of the same samples can '
    "resolve less."
)
"""What the noise-floor and resolvable-difference rows of a task table mean (LEADERBOARD.md and the site)."""


@dataclass(frozen=True)
class Floor:
    """A noise floor: its value and whether it is an upper bound (`<=`)."""

    value: float
    bound: bool = False

    def text(self) -> str:
        """'0.00', or '<=0.12' for an upper bound."""
        return ("<=" if self.bound else "") + f"{self.value:.2f}"


def resolvable_difference(n_a: int, n_b: int) -> float:
    """1.96 * sqrt(0.25 / n_a + 0.25 / n_b): the widest 95% half-width of a difference of two 0-1 cells."""
    if n_a < 1 or n_b < 1:
        raise ValueError(f"resolvable_difference needs n >= 1 on both sides (got {n_a}, {n_b})")
    return Z95 * math.sqrt(MAX_VARIANCE / n_a + MAX_VARIANCE / n_b)


def random_chunk_bound(k: int, length: int) -> float:
    """The most a random chunk ranking scores at k in an `length`-token context: min(1, k / ceil(length / 128))."""
    return min(1.0, k / max(1, math.ceil(length / CHUNK_TOKENS)))


def length_floor(task: TaskResult, metric: str, length: int) -> Floor | None:
    """The noise floor of `metric` at one length, None when the task's design gives none here."""
    if task.capability == "retrieve" and task.name in CHUNKED_TASKS and (m := RANKED_METRIC.match(metric)):
        return Floor(random_chunk_bound(int(m.group(1)), length), bound=True)
    if task.capability == "generate" and task.name in CONTAINMENT_TASKS and metric in CONTAINMENT_METRICS:
        keyed = KEYED_NEEDLES.get(task.name)
        return Floor(1.0 / keyed if keyed and metric == "score" else 0.0)
    return None


def _row(task: TaskResult, metric: str, length: int | None) -> MetricResult | None:
    return next((r for r in task.results if r.metric == metric and r.length == length and r.depth is None), None)


def noise_floor(task: TaskResult, metric: str, length: int | None) -> Floor | None:
    """The noise floor at `length`; for the pooled cell (None) the n-weighted mean over the lengths it pools."""
    if length is not None:
        return length_floor(task, metric, length)
    rows = [r for r in task.results if r.metric == metric and r.length is not None and r.depth is None and r.n > 0]
    pooled = set(task.pooled_lengths) if task.pooled_lengths is not None else {r.length for r in rows}
    parts = [(r.n, length_floor(task, metric, cast(int, r.length))) for r in rows if r.length in pooled]
    if not parts or any(f is None for _, f in parts):
        return None
    total = sum(n for n, _ in parts)
    value = sum(n * f.value for n, f in parts if f is not None) / total
    return Floor(value, bound=any(f.bound for _, f in parts if f is not None))


def floor_cells(board: Sequence[TaskResult], metric: str, columns: Sequence[int | None]) -> list[str] | None:
    """The noise-floor row's cells (one per column); None when the task has no floor at any column."""
    cells = []
    for length in columns:
        found = {f.text() for t in board if (f := noise_floor(t, metric, length)) is not None}
        cells.append(DASH if not found else next(iter(found)) if len(found) == 1 else " to ".join(sorted(found)))
    return cells if any(c != DASH for c in cells) else None


def unit_metric(board: Sequence[TaskResult], metric: str) -> bool:
    """Whether `metric` is a 0-1 score in every row of the board (the resolvable difference applies)."""
    rows = [r for t in board for r in t.results if r.metric == metric]
    return bool(rows) and all(0.0 <= v <= 1.0 for r in rows for v in (r.value, *r.ci95))


def resolution_cells(column_ns: Sequence[Sequence[int]]) -> list[str]:
    """The resolvable-difference row: per column '0.28 (n=24)' at the column's smallest n, a dash without cells;
    'none (n=1)' where the half-width reaches 1 (no difference of a 0-1 score can be told from noise)."""
    out = []
    for ns in column_ns:
        usable = [n for n in ns if n > 0]
        if not usable:
            out.append(DASH)
            continue
        n = min(usable)
        width = resolvable_difference(n, n)
        out.append(f"none (n={n})" if width >= 1 else f"{width:.2f} (n={n})")
    return out
