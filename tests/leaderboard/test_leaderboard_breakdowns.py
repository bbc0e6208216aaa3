"""The leaderboard shows effective lengths, slices and contrasts, and draws curve and slice plots (real files)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest

from longctx_eval.cli import main
from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.leaderboard.line_plots import curve_figure, slice_figure
from longctx_eval.leaderboard.markdown import render_markdown
from longctx_eval.results import (
    ContrastResult,
    CurvePoint,
    CurveResult,
    EffectiveLength,
    MetricResult,
    RunResult,
    TaskResult,
    read_run,
    write_run,
)
from tests.leaderboard.test_leaderboard import NOW, make_run
from tests.scoring.test_breakdowns import write_probe

REPO = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
OLD_RUNS = REPO / "tests" / "data" / "runs_before_coverage"


def _effective(kind: str, value: int, ci: tuple[int, int], window: bool = False, threshold=0.856) -> EffectiveLength:
    extra = {"fraction": 0.85, "base_length": 1024, "base_value": 0.9} if kind == "relative" else {}
    return EffectiveLength(
        kind=kind,
        metric="score",
        threshold=threshold if kind == "absolute" else 0.765,
        value=value,
        ci95=ci,
        lengths=[1024, 4096],
        limited_by_window=window,
        over_window_lengths=[8192] if window else [],
        **extra,
    )


def _breakdowns(score: float, window: bool, threshold: float = 0.856) -> dict:
    """Effective lengths, a distance slice, Recall@K and similarity-decay curves, and one contrast."""
    ks = range(1, 101)
    recall = CurveResult(
        name="recall_at_k",
        length=None,
        x_label="K",
        y_label="Recall@K",
        points=[CurvePoint(x=k, value=min(1.0, score * k / 20), n=30, ci95=(0.0, 1.0)) for k in ks],
    )
    decay = CurveResult(
        name="similarity_decay",
        length=None,
        x_label="rank",
        y_label="mean score",
        points=[CurvePoint(x=k, value=score / k, n=30, ci95=(score / k / 2, score / k)) for k in range(1, 11)],
    )
    slices = [
        MetricResult(
            metric="score", length=None, value=score - 0.1 * i, n=10, ci95=(0.1, 0.9), slice={"distance_bucket": b}
        )
        for i, b in enumerate(["0-1K", "1K-4K", "4K+"])
    ]
    contrast = ContrastResult(
        name="same_vs_cross",
        metric="score",
        key="placement",
        a="same",
        b="cross",
        length=None,
        value_a=0.9,
        n_a=20,
        value_b=0.59,
        n_b=20,
        difference=0.31,
        ci95=(0.12, 0.5),
    )
    return {
        "effective_length": [
            _effective("absolute", 4096 if window else 0, (1024, 4096) if window else (0, 1024), window, threshold),
            _effective("relative", 1024, (1024, 4096)),
        ],
        "slices": slices,
        "curves": [recall, decay],
        "contrasts": [contrast],
    }


def _run(name: str, score: float, window: bool = False, threshold: float = 0.856) -> RunResult:
    run = make_run(name, "2025-05-01T10:00:00+00:00", score)
    needle = run.tasks[0].model_copy(update=_breakdowns(score, window, threshold))
    return run.model_copy(update={"tasks": [needle, run.tasks[1]]})


def _png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert matplotlib.image.imread(path).shape[0] > 100


def test_breakdown_fields_round_trip_through_a_run_file(tmp_path: Path) -> None:
    run = _run("m", 0.9, window=True)
    write_run(run, tmp_path / "run.json")
    again = read_run(tmp_path / "run.json")
    assert again == run
    task = again.tasks[0]
    assert task.effective_length[0].limited_by_window and task.effective_length[0].ci95 == (1024, 4096)
    assert task.slices[0].slice == {"distance_bucket": "0-1K"}
    flags = task.model_copy(update={"slices": [task.slices[0].model_copy(update={"slice": {"same": True}})]})
    write_run(run.model_copy(update={"tasks": [flags]}), tmp_path / "flags.json")
    assert read_run(tmp_path / "flags.json").tasks[0].slices[0].slice == {"same": True}  # a bool stays a bool


def test_a_sliced_row_is_refused_among_the_unsliced_ones() -> None:
    task = _run("m", 0.9).tasks[0]
    with pytest.raises(ValueError, match="sliced rows belong in `slices`"):
        TaskResult.model_validate({**task.model_dump(), "results": [task.slices[0].model_dump()]})
    with pytest.raises(ValueError, match="exactly one key"):
        TaskResult.model_validate({**task.model_dump(), "slices": [task.results[0].model_dump()]})


def test_markdown_shows_effective_lengths_slices_and_contrasts() -> None:
    md = render_markdown([_run("alpha", 0.9, window=True), _run("beta", 0.7)], NOW.isoformat(), {}, min_n=1)
    needle = md.split("## needle", 1)[1].split("## retrieval", 1)[0]
    head = next(line for line in needle.splitlines() if line.startswith("| model"))
    assert head.endswith("| eff. length | rel. eff. length |")
    alpha = next(line for line in needle.splitlines() if line.startswith("| **alpha**"))
    assert alpha.endswith("| 4K [1K, 4K] (window) | 1K [1K, 4K] |")
    beta = next(line for line in needle.splitlines() if line.startswith("| **beta**"))
    assert "| <1K [<1K, 1K] |" in beta
    assert "stays at or above 0.856 (RULER's 85.6%) at every evaluated length" in needle
    assert "(window): it held at every length the model could read" in needle
    assert "By `distance_bucket` (`score`, all lengths pooled):" in needle
    assert "| model | 0-1K | 1K-4K | 4K+ |" in needle
    assert "`same_vs_cross`: `score` at placement=same minus at placement=cross" in needle
    assert "| **alpha** | same_vs_cross | 0.31 [0.12, 0.50] (0.90 n=20 vs 0.59 n=20) |" in needle
    retrieval = md.split("## retrieval", 1)[1]
    assert "eff. length" not in retrieval.split("## Skipped")[0]  # a task without them has no such column


def test_different_thresholds_are_named_in_the_cells() -> None:
    md = render_markdown([_run("alpha", 0.9, window=True), _run("beta", 0.7, threshold=0.5)], NOW.isoformat(), {})
    assert "4K [1K, 4K] (window) (>=0.856)" in md and "(>=0.5)" in md
    assert "the threshold in the cell" in md


def test_leaderboard_draws_curve_and_slice_plots_and_removes_stale_ones(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    write_run(_run("alpha", 0.9, window=True), inputs / "a" / "run.json")
    write_run(_run("beta", 0.7), inputs / "b" / "run.json")
    out = tmp_path / "lb"
    report = update_leaderboard([inputs], out, now=NOW)
    plots = out / "plots"
    names = {"needle.png", "needle.recall_at_k.png", "needle.similarity_decay.png", "needle.by-distance_bucket.png"}
    assert names <= {p.name for p in plots.iterdir()}
    for name in names:
        _png(plots / name)
    assert set(report.written) >= {plots / n for n in names}
    md = (out / "LEADERBOARD.md").read_text()
    for alt, name in [("heatmap", "needle.png"), ("recall at k", "needle.recall_at_k.png")]:
        assert f"![needle {alt}](plots/{name})" in md
    assert "![needle by distance bucket](plots/needle.by-distance_bucket.png)" in md

    # a later run of the same models without curves: their plots go, files that are not ours stay
    (plots / "notes.txt.png").write_bytes(b"x")
    for name, score in (("alpha", 0.9), ("beta", 0.7)):
        plain = make_run(name, "2025-05-02T10:00:00+00:00", score)
        write_run(plain, inputs / f"{name}-2" / "run.json")
    report = update_leaderboard([inputs], out, now=NOW)
    assert {p.name for p in report.removed} == names - {"needle.png"}
    assert (plots / "needle.png").is_file() and (plots / "notes.txt.png").is_file()


def test_curve_figure_has_one_line_per_system_and_slice_figure_one_series_each() -> None:
    runs = [_run("alpha", 0.9), _run("beta", 0.7)]
    fig = curve_figure("needle", "recall_at_k", runs)
    assert fig is not None
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["alpha", "beta"]
    assert ax.get_xlabel() == "K" and len(ax.get_lines()[0].get_xdata()) == 100
    assert curve_figure("needle", "no_such_curve", runs) is None
    fig = slice_figure("needle", "distance_bucket", runs)
    assert fig is not None
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["0-1K", "1K-4K", "4K+"]
    assert slice_figure("retrieval", "distance_bucket", runs) is None


def test_old_run_files_render_without_breakdowns(tmp_path: Path) -> None:
    out = tmp_path / "lb"
    report = update_leaderboard(sorted(OLD_RUNS.glob("*.json")), out, now=NOW)
    assert report.skipped == [] and report.entries == 4
    md = (out / "LEADERBOARD.md").read_text()
    assert "eff. length" not in md and "Contrasts (" not in md
    assert not [p for p in (out / "plots").iterdir() if p.name.count(".") > 1]


def test_a_real_oracle_run_reaches_the_leaderboard(tmp_path: Path) -> None:
    plugins = write_probe(tmp_path / "plugins")
    args = ["run", "--model", "oracle", "--tasks", "probe", "--include-path", str(plugins), "--out", str(tmp_path)]
    assert main(args) == 0
    assert main(["leaderboard", str(tmp_path / "oracle"), "--out", str(tmp_path / "lb"), "--min-n", "8"]) == 0
    md = (tmp_path / "lb" / "LEADERBOARD.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| **oracle**") and "eff" not in line)
    assert row.endswith("| <64 [<64, 64] | 64 [64, 256] |")  # n=8 per length: at --min-n 8 none is low n
    assert main(["leaderboard", str(tmp_path / "oracle"), "--out", str(tmp_path / "lb30")]) == 0
    md = (tmp_path / "lb30" / "LEADERBOARD.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| **oracle**") and "eff" not in line)
    assert row.endswith("| low n (64, 128, 256) | low n (64, 128, 256) |")  # at the default 30 they are
    assert "By `hops` (`score`, all lengths pooled):" in md and "| **oracle** | same_vs_cross |" in md
    for name in ("probe.png", "probe.recall_at_k.png", "probe.by-hops.png", "probe.by-placement.png"):
        _png(tmp_path / "lb" / "plots" / name)
    board = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    assert board["entries"][0]["tasks"][0]["effective_length"][0]["kind"] == "absolute"


def test_breakdowns_compare_only_models_evaluated_at_the_same_lengths() -> None:
    """A model pooled over 32K-128K is never in one slice or contrast table with a model pooled over 1K-4K: each
    group of models sharing their lengths gets its own table, introduced by those lengths, and the page says why."""
    short, same = _run("short", 0.9), _run("same", 0.8)
    far = _run("far", 0.7)
    needle = far.tasks[0].model_copy(update={"pooled_lengths": [32768, 131072], "lengths": [32768, 131072]})
    far = far.model_copy(update={"tasks": [needle, far.tasks[1]]})
    md = render_markdown([short, same, far], NOW.isoformat(), {}, min_n=1)
    page = md.split("## needle", 1)[1].split("## retrieval", 1)[0]
    assert "One table per group of models evaluated at the same lengths" in page
    groups = page.split("By `distance_bucket`", 1)[1].split("Contrasts (", 1)[0]
    first, second = groups.split("Evaluated at **32K, 128K**:")
    assert "| **short** |" in first and "| **same** |" in first and "| **far** |" not in first
    assert "| **far** |" in second and "| **short** |" not in second
    assert page.count("Evaluated at **32K, 128K**:") == 2  # the slice table and the contrast table
    alone = render_markdown([short, same], NOW.isoformat(), {}, min_n=1)
    assert "Evaluated at" not in alone  # one group: one table, as before


def test_no_legend_is_clipped_however_long_the_labels() -> None:
    """Long model names (the reference board's by-hops plot clipped 'rag-bm25-smollm2-135m (32K, 128K)' at both
    ends): every legend lies inside its figure, in fewer columns or a wider figure, never cut off."""
    from longctx_eval.leaderboard.heatmaps import task_figure
    from longctx_eval.leaderboard.plot_legend import legend_fits

    names = ["rag-bm25-smollm2-135m-hops2", "rag-bm25-smollm2-135m", "smollm2-135m", "x" * 90]
    entries = [_run(n, 0.9 - 0.1 * i) for i, n in enumerate(names)]
    figures = [slice_figure("needle", "distance_bucket", entries, 1), curve_figure("needle", "recall_at_k", entries, 1)]
    figures.append(task_figure("needle", entries, 1))
    assert all(f is not None for f in figures)
    assert figures[0].legends and figures[1].legends and all(legend_fits(f) for f in figures)
