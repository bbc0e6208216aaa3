"""Breakdowns of clustered samples: run-file rows, curves, contrasts and effective lengths resample haystacks, count
them, and show no interval where one haystack (or fewer than 5 samples) cannot support one."""

from __future__ import annotations

import numpy as np

from longctx_eval.metrics.aggregate import mean
from longctx_eval.metrics.contrast import contrast
from longctx_eval.metrics.curves import curve
from longctx_eval.sample import Sample, Score
from longctx_eval.scoring.contrasts import contrast_results
from longctx_eval.scoring.curves import curve_results
from longctx_eval.scoring.effective_length import EffectiveLengthConfig, effective_lengths
from longctx_eval.scoring.labels import contrast_sentence, format_cell, format_effective, summary_value
from longctx_eval.scoring.score import grouped_results


def _scored(n_haystacks: int, per: int, length: int = 1024, seed: int = 0) -> list[tuple[Sample, Score]]:
    """`per` samples on each of `n_haystacks` haystacks; a haystack is easy or hard for all of its samples,
    half its samples placed 'same', half 'cross'."""
    rng = np.random.default_rng(seed)
    out = []
    for h in range(n_haystacks):
        p = 0.9 if h % 2 == 0 else 0.3
        for k in range(per):
            meta = {
                "target_tokens": length,
                "depth": round(k / per, 2),
                "cluster": f"haystack-{length}-{h}",
                "placement": "same" if k % 2 == 0 else "cross",
            }
            value = float(rng.random() < p)
            values = {"score": value, "r@1": value, "r@2": min(1.0, value + float(rng.random() < 0.5))}
            out.append((Sample(f"L{length}-h{h}-{k}", "", "q", {}, meta), Score(values | {"over_length": 0.0})))
    return out


def test_rows_resample_haystacks_and_count_them() -> None:
    scored = _scored(8, 10)
    pooled = next(r for r in grouped_results(scored, [mean("score")]) if r.length is None)
    assert pooled.n == 80 and pooled.clusters == 8 and pooled.n_eff is not None and pooled.n_eff < 40
    # the same scores as 80 independent samples: a narrower interval, no cluster count shown
    alone = [
        (Sample(s.id, "", "q", {}, {k: v for k, v in s.metadata.items() if k != "cluster"}), sc) for s, sc in scored
    ]
    plain = next(r for r in grouped_results(alone, [mean("score")]) if r.length is None)
    assert plain.clusters == 80 and plain.n_eff is None and plain.value == pooled.value
    assert pooled.ci95[1] - pooled.ci95[0] > 1.5 * (plain.ci95[1] - plain.ci95[0])
    assert format_cell(pooled, noun="haystacks").endswith(f"n=80 over 8 haystacks, n_eff {pooled.n_eff:.3g}")
    assert format_cell(plain).endswith("] n=80")
    assert summary_value(pooled, "haystacks", counted=True).endswith(
        f"(n=80 over 8 haystacks, n_eff {pooled.n_eff:.3g})"
    )


def test_one_haystack_shows_no_interval() -> None:
    row = next(r for r in grouped_results(_scored(1, 66), [mean("score")]) if r.length is None)
    assert row.clusters == 1 and row.ci95 == (row.value, row.value)
    assert format_cell(row, noun="haystacks").endswith("n=66 over 1 haystack, no interval (< 2 haystacks)")
    assert "[" not in format_cell(row, noun="haystacks")


def test_curve_points_count_haystacks_and_band_only_where_they_can() -> None:
    c = curve("recall_at_k", ["r@1", "r@2"], [1, 2])
    (pooled,) = [r for r in curve_results(_scored(6, 5), [c]) if r.length is None]
    assert [p.clusters for p in pooled.points] == [6, 6] and [p.n for p in pooled.points] == [30, 30]
    assert all(p.ci95[0] < p.value < p.ci95[1] for p in pooled.points)
    (single,) = curve_results(_scored(1, 30, seed=4), [c])[:1]
    assert all(p.clusters == 1 and p.ci95 == (p.value, p.value) for p in single.points)


def test_contrast_resamples_the_haystacks_both_sides_share() -> None:
    scored = _scored(8, 10, seed=2)
    (row, *_) = contrast_results(
        scored, [contrast("drop", "score", "placement", "same", "cross")], {"score": mean("score")}
    )
    assert row.length is None and row.clusters_a == row.clusters_b == 8 and row.n_a == row.n_b == 40
    assert row.ci95[0] <= row.difference <= row.ci95[1]
    assert "n=40 over 8 haystacks vs" in contrast_sentence(row, "haystacks")
    lonely = contrast_results(
        _scored(1, 10), [contrast("drop", "score", "placement", "same", "cross")], {"score": mean("score")}
    )
    assert "(no interval: < 2 clusters)" in contrast_sentence(lonely[0])


def test_effective_length_needs_two_haystacks_per_length_for_an_interval() -> None:
    per_length, clusters = {}, {}
    for length in (1024, 2048):
        rows = _scored(4, 10, length)
        per_length[length] = np.array([[sc.values["score"]] for _, sc in rows])
        clusters[length] = [s.metadata["cluster"] for s, _ in rows]
    both = effective_lengths(per_length, mean("score"), EffectiveLengthConfig(), clusters=clusters)
    assert {e.min_n for e in both} == {40} and {e.min_clusters for e in both} == {4}
    assert all("no interval" not in format_effective(e) for e in both)
    clusters[2048] = ["haystack-one"] * 40
    one = effective_lengths(per_length, mean("score"), EffectiveLengthConfig(), clusters=clusters)
    assert all(e.min_clusters == 1 for e in one)
    assert all(format_effective(e, "haystacks").endswith("(no interval: < 2 haystacks at a length)") for e in one)
    few = {n: a[:3] for n, a in per_length.items()}
    assert all(
        "(no interval: n < 5 at a length)" in format_effective(e)
        for e in effective_lengths(few, mean("score"), EffectiveLengthConfig())
    )
