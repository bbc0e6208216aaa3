"""Short texts of results (cells, lengths, effective lengths, contrasts) shared by the run summary, the plots
and LEADERBOARD.md."""

from __future__ import annotations

from longctx_eval.metrics.bootstrap import interval_gap
from longctx_eval.metrics.cluster_stats import DEFAULT_NOUN, count_text
from longctx_eval.results import CompositeScore, ContrastResult, EffectiveLength, MetricResult

DASH = "—"


def format_number(value: float, unit_interval: bool) -> str:
    """Two decimals for 0-1 metrics; otherwise whole numbers from 100 up, three significant digits below."""
    if unit_interval:
        return f"{value:.2f}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def clustered(row: MetricResult) -> bool:
    """Whether the row's samples share clusters (fewer clusters than samples): then its count names them."""
    return row.clusters is not None and row.clusters < row.n


def cluster_label(row: MetricResult, noun: str = DEFAULT_NOUN) -> str:
    """' over 4 haystacks, n_eff 31.2' for a row whose samples share clusters, else ''."""
    if not clustered(row):
        return ""
    eff = "" if row.n_eff is None else f", n_eff {format_number(row.n_eff, False)}"
    return f" over {count_text(row.clusters or 0, noun)}{eff}"


def format_cell(row: MetricResult | None, n_label: str | None = None, noun: str = DEFAULT_NOUN) -> str:
    """'0.80 [0.60, 0.95] n=20', '0.80 [0.55, 0.98] n=100 over 4 haystacks, n_eff 31.2' (samples sharing
    clusters), '0.14 n=2, no interval (n < 5)' (too few samples or clusters), or a dash when not reported;
    `n_label` replaces the 'n=20' count (a partial cell's 'n=2/5')."""
    if row is None:
        return DASH
    unit = all(0.0 <= v <= 1.0 for v in (row.value, *row.ci95))
    count = (n_label or f"n={row.n}") + cluster_label(row, noun)
    gap = interval_gap(row.n, row.clusters, noun)
    if gap is not None:
        return f"{format_number(row.value, unit)} {count}, no interval ({gap})"
    lo, hi = (format_number(v, unit) for v in row.ci95)
    return f"{format_number(row.value, unit)} [{lo}, {hi}] {count}"


def summary_value(row: MetricResult, noun: str = DEFAULT_NOUN, counted: bool = False) -> str:
    """A pooled metric in the run summary: 'score=0.800 [0.60, 0.95]', or 'score=0.500 n=2, no interval (n < 5)';
    `counted` (the task's first row) adds '(n=100 over 4 haystacks, n_eff 31.2)' when its samples share clusters."""
    gap = interval_gap(row.n, row.clusters, noun)
    if gap is not None:
        return f"{row.metric}={row.value:.3f} n={row.n}{cluster_label(row, noun)}, no interval ({gap})"
    text = f"{row.metric}={row.value:.3f} [{row.ci95[0]:.2f}, {row.ci95[1]:.2f}]"
    return text + (f" (n={row.n}{cluster_label(row, noun)})" if counted and clustered(row) else "")


def length_label(length: int | None) -> str:
    """'1M' for multiples of 2**20 tokens, '4K' for multiples of 1024, else the plain number; None is 'all'."""
    if length is None:
        return "all"
    if length >= 1 << 20 and length % (1 << 20) == 0:
        return f"{length >> 20}M"
    return f"{length // 1024}K" if length % 1024 == 0 else str(length)


def effective_label(value: int, lengths: list[int]) -> str:
    """An effective length: '4K', or '<1K' for 0 (below the threshold already at the shortest length)."""
    if value == 0:
        return f"<{length_label(min(lengths))}" if lengths else "0"
    return length_label(value)


def format_effective(e: EffectiveLength, noun: str = DEFAULT_NOUN) -> str:
    """'4K [2K, 8K]', with ' (window)' when the model's window, not its score, ended the measurement; '4K (no
    interval: n < 5 at a length)' when a length had too few samples or clusters to resample."""
    gap = None if e.min_n is None else interval_gap(e.min_n, e.min_clusters, noun)
    if gap is not None:
        text = f"{effective_label(e.value, e.lengths)} (no interval: {gap} at a length)"
    else:
        lo, hi = (effective_label(v, e.lengths) for v in e.ci95)
        text = f"{effective_label(e.value, e.lengths)} [{lo}, {hi}]"
    return text + (" (window)" if e.limited_by_window else "")


def effective_rule(e: EffectiveLength) -> str:
    """What the threshold was: 'score >= 0.856' or 'score >= 0.807 = 85% of 0.95 at 1K'."""
    text = f"{e.metric} >= {e.threshold:.3g}"
    if e.kind == "relative" and e.fraction is not None and e.base_value is not None:
        text += f" = {e.fraction:.0%} of {e.base_value:.3g} at {length_label(e.base_length)}"
    return text


def effective_sentence(e: EffectiveLength, noun: str = DEFAULT_NOUN) -> str:
    """One line: kind, rule, value with interval, the lengths it ran over, whether the window limited it."""
    lengths = ", ".join(length_label(n) for n in e.lengths)
    text = f"effective length, {e.kind} ({effective_rule(e)}): {format_effective(e, noun)} (lengths {lengths})"
    if e.limited_by_window:
        over = ", ".join(length_label(n) for n in e.over_window_lengths if n > e.value)
        text += f"; limited by the model's window ({over} over it)"
    return text


def value_text(value: object) -> str:
    """A slice value as shown: strings bare, everything else as written in JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def contrast_label(c: ContrastResult) -> str:
    """'placement=same - placement=cross' style description of the two sides."""
    return f"{c.key}={value_text(c.a)} - {c.key}={value_text(c.b)}"


def format_difference(c: ContrastResult, noun: str = DEFAULT_NOUN) -> str:
    """'0.31 [0.12, 0.50]', or '0.31 (no interval: n < 5)' when a side has too few samples or clusters."""
    gap = interval_gap(c.n_a, c.clusters_a, noun) or interval_gap(c.n_b, c.clusters_b, noun)
    if gap is not None:
        return f"{c.difference:.2f} (no interval: {gap})"
    return f"{c.difference:.2f} [{c.ci95[0]:.2f}, {c.ci95[1]:.2f}]"


def side_count(n: int, clusters: int | None, noun: str = DEFAULT_NOUN) -> str:
    """'n=12', or 'n=12 over 3 haystacks' when the side's samples share clusters."""
    shared = clusters is not None and clusters < n
    return f"n={n}" + (f" over {count_text(clusters or 0, noun)}" if shared else "")


def contrast_sentence(c: ContrastResult, noun: str = DEFAULT_NOUN) -> str:
    """One line: name, metric and sides, difference with interval, each side's value, n and clusters."""
    where = "all lengths" if c.length is None else length_label(c.length)
    return (
        f"{c.name} ({c.metric}: {contrast_label(c)}, {where}): {format_difference(c, noun)} "
        f"({c.value_a:.2f} {side_count(c.n_a, c.clusters_a, noun)} vs {c.value_b:.2f} "
        f"{side_count(c.n_b, c.clusters_b, noun)})"
    )


def composite_sentence(c: CompositeScore) -> str:
    """'composite 0.274 (3 of 5 failed requests counted 0)' for the run summary."""
    failed = f" ({c.failed_as_zero} of {c.fidelity_n} failed requests counted 0)" if c.failed_as_zero else ""
    return f"composite {c.value:.3f}{failed}"
