"""Is a task's leader significantly ahead of its runner-up? One paired test per task board, on shared samples.

The leader and runner-up are the board's first two ranked models. Their per-sample scores (from input run
folders: `scores/`, `samples/`) are joined by id and design (`paired_scores.join`: another context, question or
gold under one id is refused), kept to the lengths the board ranks on when it names them, and tested with
`scoring/paired_tests.py` (the sign-flip test of per-cluster sums where pairs share a haystack or document, else
McNemar's exact test for 0/1 scores, else the sign-flip permutation test): ahead when the leader's mean is higher
on those pairs and p < 0.05. One test per task, not corrected across tasks (use
`longctx-eval compare` for Holm across cells). Boards built from run copies alone have no per-sample scores:
then the line says the question is not testable, never guesses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from longctx_eval.leaderboard.grid import task_of
from longctx_eval.leaderboard.page_model import Block, Para, as_value, with_values
from longctx_eval.metrics.bootstrap import interval_gap
from longctx_eval.metrics.cluster_stats import DEFAULT_NOUN, count_text
from longctx_eval.results import RunResult
from longctx_eval.scoring.labels import length_label
from longctx_eval.scoring.paired_aggregate import paired_join, paired_rows, per_sample
from longctx_eval.scoring.paired_scores import PairKey, SampleScore
from longctx_eval.scoring.paired_tests import CLUSTER_SIGN_FLIP, CLUSTER_SWAP, MCNEMAR, SIGN_FLIP

ALPHA = 0.05
TEST_NAMES = {
    MCNEMAR: "McNemar's exact test",
    SIGN_FLIP: "sign-flip permutation test",
    CLUSTER_SIGN_FLIP: "sign-flip test of per-cluster sums",
    CLUSTER_SWAP: "permutation test swapping each cluster's two sides (the metric recomputed)",
}
Samples = Mapping[str, Mapping[str, Mapping[PairKey, SampleScore]]]
"""Per model name and board: that model's per-sample scores (as `leaderboard._samples_of` gathers them)."""


@dataclass(frozen=True)
class LeaderTest:
    """The leader vs runner-up test of one board, or why it could not run (`untestable`)."""

    leader: str
    runner_up: str
    untestable: str = ""
    n: int = 0
    difference: float = 0.0
    ci95: tuple[float, float] | None = None
    """None with fewer than MIN_N_FOR_INTERVAL shared samples, or all from one cluster."""
    clusters: int | None = None
    """Distinct clusters of the shared samples (None: unknown)."""
    noun: str = DEFAULT_NOUN
    test: str = ""
    p_value: float = 1.0
    lengths: tuple[int, ...] = ()
    refused: int = 0
    lacking: tuple[str, ...] = ()
    """The models without per-sample scores, when that made it untestable."""

    @property
    def ahead(self) -> bool:
        """Significantly ahead: higher on the shared samples and p < ALPHA."""
        return not self.untestable and self.difference > 0 and self.p_value < ALPHA

    def _interval(self) -> str:
        """'[+0.010, +0.200]' or '(no interval: n < 5)'."""
        if self.ci95 is None:
            return f"(no interval: {interval_gap(self.n, self.clusters, self.noun) or 'too few'})"
        return f"[{self.ci95[0]:+.3f}, {self.ci95[1]:+.3f}]"

    def sentence(self, name: Callable[[str], str] = str) -> str:
        """One sentence saying what was tested and the verdict: plain text, or Markdown with `name=md_text`
        (applied to the model names, the only values in it)."""
        head = f"Is {name(self.leader)} significantly ahead of the runner-up {name(self.runner_up)}?"
        if self.lacking:
            lacking = " and ".join(name(n) for n in self.lacking)
            return f"{head} Not testable: no per-sample scores for {lacking} (this board was read from run copies)."
        if self.untestable:
            return f"{head} Not testable: {self.untestable}."
        verdict = "yes" if self.ahead else "no"
        test = TEST_NAMES.get(self.test, self.test)
        where = ", ".join(length_label(n) for n in self.lengths)
        refused = f"; {self.refused} pair(s) of another design refused" if self.refused else ""
        return (
            f"{head} {verdict.capitalize()}: {self.difference:+.3f} {self._interval()} on "
            f"{self.n} shared samples{self._over()} ({where}{refused}), {test} p = {_p(self.p_value)} "
            f"(significant: p < {ALPHA}, one paired test for this task alone)."
        )

    def _over(self) -> str:
        """' over 4 haystacks' when the shared samples share clusters."""
        shared = self.clusters is not None and self.clusters < self.n
        return f" over {count_text(self.clusters or 0, self.noun)}" if shared else ""


def leader_test(
    board: str, ranked: Sequence[RunResult], metric: str, samples: Samples | None, lengths: Sequence[int] = ()
) -> LeaderTest | None:
    """The test of `ranked[0]` against `ranked[1]` on `board` (None with fewer than two ranked models), on the
    pairs at `lengths` (the board's ranking lengths; empty = every shared length)."""
    if len(ranked) < 2:
        return None
    a, b = ranked[0].model.name, ranked[1].model.name
    sa, sb = (samples or {}).get(a, {}).get(board), (samples or {}).get(b, {}).get(board)
    if not sa or not sb:
        lacking = tuple(n for n, s in ((a, sa), (b, sb)) if not s)
        why = f"no per-sample scores for {' and '.join(lacking)} (this board was read from run copies)"
        return LeaderTest(a, b, untestable=why, lacking=lacking)
    joined, aggregate = paired_join(sa, sb, metric, task_of(ranked[0], board))
    keys = [k for k in joined.pairs if not lengths or sa[k].length in lengths]
    if not keys:
        why = f"{joined.n_refused} refused as another design" if joined.n_refused else "none in common"
        if not per_sample(sa, metric) and aggregate is None:
            why = f"{metric} is computed over a cell's samples together and its task is not installed here"
        return LeaderTest(a, b, untestable=f"no shared samples at the ranking lengths ({why})")
    pooled = paired_rows(sa, sb, metric, aggregate, keys)[-1]
    return LeaderTest(
        leader=a,
        runner_up=b,
        n=pooled.n,
        difference=pooled.difference,
        ci95=pooled.ci95,
        test=pooled.test,
        p_value=pooled.p_value,
        clusters=pooled.clusters,
        noun=_noun(ranked[0], board),
        lengths=tuple(sorted(cast(set[int], {sa[k].length for k in keys if sa[k].length is not None}))),
        refused=joined.n_refused,
    )


def leader_blocks(
    board: str, ranked: Sequence[RunResult], metric: str, samples: Samples | None, lengths: Sequence[int] = ()
) -> list[Block]:
    """The test's sentence as a paragraph, model names as values (nothing with fewer than two ranked models)."""
    found = leader_test(board, ranked, metric, samples, lengths)
    return [] if found is None else [sentence_para(found)]


def sentence_para(found: LeaderTest) -> Para:
    """`found.sentence()` as spans: the model names (the only values in it) apart from the board's own words."""
    return Para(with_values(found.sentence(as_value)), "leader")


def _noun(entry: RunResult, board: str) -> str:
    """What the board's clusters are, from the leader's task result ('haystacks', 'documents')."""
    found = next((t for t in entry.tasks if board in (t.name, f"{t.name} ({t.capability})")), None)
    return (found.cluster_noun if found is not None else None) or DEFAULT_NOUN


def _p(p: float) -> str:
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"
