"""Statistical honesty on the built leaderboard: low-n cells, the ranking rule, noise floors and resolvable
differences, served models' figures, the Models table's context window, and plots that do not mislead.

Run files are written through the real records (`results.write_run`) and built by `update_leaderboard`, the
code `longctx-eval leaderboard` runs; serving sections and composites come from the real summary functions.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from longctx_eval.cli import main
from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.leaderboard.grid import ranking
from longctx_eval.leaderboard.heatmaps import panel_axes, task_figure
from longctx_eval.leaderboard.line_plots import curve_figure, slice_figure
from longctx_eval.leaderboard.noise import (
    CHUNK_TOKENS,
    CHUNKED_TASKS,
    KEYED_NEEDLES,
    random_chunk_bound,
    resolution_cells,
    resolvable_difference,
)
from longctx_eval.results import (
    ContrastResult,
    Coverage,
    CurvePoint,
    CurveResult,
    EffectiveLength,
    MetricResult,
    RunResult,
    ServingStats,
    TaskResult,
    Throughput,
    write_run,
)
from longctx_eval.scoring.composite import composite_score
from longctx_eval.scoring.labels import DASH
from longctx_eval.scoring.latency import serving_section
from tests.leaderboard.test_leaderboard import NOW, make_run, section

STARTED = "2025-05-01T00:00:00+00:00"


def _row(metric: str, length: int | None, value: float, n: int, **extra) -> MetricResult:
    ci = (value, value) if n == 1 else (max(0.0, value - 0.1), min(1.0, value + 0.1))
    return MetricResult(metric=metric, length=length, value=value, n=n, ci95=ci, **extra)


def _task(
    name: str,
    cells: dict[int, tuple[float, int]],
    *,
    capability: str = "generate",
    metric: str = "score",
    **update,
) -> TaskResult:
    """A depth-free task: per length (value, n), every planned sample evaluated, pooled over all lengths."""
    rows = [_row(metric, n, v, k) for n, (v, k) in cells.items()]
    total = sum(k for _, k in cells.values())
    rows.append(_row(metric, None, sum(v * k for v, k in cells.values()) / total, total))
    return TaskResult(
        name=name,
        version="1",
        capability=capability,
        dataset_hash="d0d0" * 16,
        n_samples=total,
        over_length=0,
        errors=0,
        results=rows,
        throughput=Throughput(samples_per_s=1.0, prompt_tokens_per_s=100.0, seconds=1.0),
        coverage=[Coverage(length=n, planned=k, evaluated=k, over_length=0) for n, (_, k) in cells.items()],
        pooled_lengths=sorted(cells),
        **update,
    )


def _run(name: str, tasks: list[TaskResult], **model) -> RunResult:
    base = make_run(name, STARTED)
    return base.model_copy(update={"tasks": tasks, "skipped": [], "model": base.model.model_copy(update=model)})


def _build(tmp_path: Path, runs: list[RunResult], **kwargs) -> str:
    inputs = tmp_path / "in"
    for run in runs:
        write_run(run, inputs / run.model.name / "run.json")
    update_leaderboard([inputs], tmp_path / "lb", now=NOW, **kwargs)
    return (tmp_path / "lb" / "LEADERBOARD.md").read_text()


def _line(text: str, model: str) -> list[str]:
    return next(line for line in text.splitlines() if line.startswith(f"| **{model}**")).split(" | ")


# --- low n -----------------------------------------------------------------------------------------------


def test_low_n_cells_are_marked_and_kept_out_of_effective_length_and_contrasts(tmp_path: Path) -> None:
    effective = EffectiveLength(
        kind="absolute", metric="score", threshold=0.856, value=1024, ci95=(1024, 2048), lengths=[1024, 2048],
        limited_by_window=False,
    )  # fmt: skip
    contrast = ContrastResult(
        name="drop", metric="score", key="placement", a="same", b="cross", length=None,
        value_a=0.9, n_a=3, value_b=0.5, n_b=3, difference=0.4, ci95=(0.0, 0.8),
    )  # fmt: skip
    few = _task("alpha", {1024: (0.9, 40), 2048: (0.5, 5)}, effective_length=[effective], contrasts=[contrast])
    one = _task("alpha", {1024: (0.8, 40), 2048: (0.14, 1)}, effective_length=[effective])
    md = _build(tmp_path, [_run("few", [few]), _run("one", [one])])
    alpha = section(md, "alpha")
    row = _line(alpha, "few")
    assert row[1] == "0.90 [0.80, 1.00] n=40"  # 40 >= 30: no mark
    assert row[2] == "0.50 [0.40, 0.60] n=5 (low n)"
    assert row[-1].startswith("low n (2K)")  # the effective length ran over a low-n length: not shown
    assert _line(alpha, "one")[2] == "0.14 n=1, no interval (n < 5) (low n)"  # one sample: no interval
    assert "| **few** | drop | low n (3 vs 3) |" in alpha  # no difference from 3 vs 3 samples
    assert "0.40 [0.00, 0.80]" not in alpha
    assert "**low n**: fewer than 30 samples" in md
    # --min-n 5: the 5-sample cell is no longer low n and the effective length shows
    md = _build(tmp_path / "five", [_run("few", [few]), _run("one", [one])], min_n=5)
    row = _line(section(md, "alpha"), "few")
    assert row[2] == "0.50 [0.40, 0.60] n=5" and row[-1].startswith("1K [1K, 2K]")
    assert "**low n**: fewer than 5 samples" in md


def test_low_n_marks_in_the_heatmap_and_no_sort_key_on_the_site(tmp_path: Path) -> None:
    few = _task("alpha", {1024: (0.9, 40), 2048: (0.5, 5)})
    run = _run("few", [few])
    fig = task_figure("alpha", [run])
    assert fig is not None
    texts = [t.get_text() for t in panel_axes(fig)[0].texts]
    assert texts[:2] == ["0.90", "0.50\u2020"]
    assert any("low n, fewer than 30" in t.get_text() for t in fig.legends[0].get_texts())
    write_run(run, tmp_path / "in" / "run.json")
    update_leaderboard([tmp_path / "in"], tmp_path / "lb", now=NOW, site=tmp_path / "site")
    html = (tmp_path / "site" / "task-alpha.html").read_text()
    assert 'class="low-n">0.50 [0.40, 0.60] n=5 (low n)</td>' in html  # shown, but no data-sort: never sorted on
    assert 'data-sort="0.9"' in html


def test_the_heatmap_all_column_names_the_lengths_each_model_pools() -> None:
    # One pooled cell over 1K-2K beside one over 1K-4K must not read as the same thing.
    same = [_run(m, [_task("alpha", {1024: (0.5, 40), 2048: (0.5, 40)})]) for m in ("a", "b")]
    fig = task_figure("alpha", same)
    assert fig is not None
    ax = panel_axes(fig)[0]
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "all\n(1K, 2K)"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    mixed = [same[0], _run("c", [_task("alpha", {1024: (0.5, 40), 2048: (0.5, 40), 4096: (0.5, 40)})])]
    fig = task_figure("alpha", mixed)
    assert fig is not None
    ax = panel_axes(fig)[0]
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "all"
    assert sorted(t.get_text() for t in ax.get_yticklabels()) == ["a (all = 1K, 2K)", "c (all = 1K, 2K, 4K)"]


def test_min_n_flag_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["leaderboard", str(tmp_path), "--out", str(tmp_path / "lb"), "--min-n", "0"])
    assert exc.value.code == 2 and "--min-n" in capsys.readouterr().err


# --- ranking only on shared lengths ----------------------------------------------------------------------


def _ranking_runs() -> list[RunResult]:
    # a and b share 1K and 2K; c is best pooled but only at 8K and 32K; d has only low-n cells.
    return [
        _run("a", [_task("alpha", {1024: (0.7, 40), 2048: (0.6, 40)})]),
        _run("b", [_task("alpha", {1024: (0.9, 40), 2048: (0.2, 40), 4096: (0.1, 40)})]),
        _run("c", [_task("alpha", {8192: (1.0, 40), 32768: (1.0, 40)})]),
        _run("d", [_task("alpha", {1024: (1.0, 4), 2048: (1.0, 4)})]),
    ]


def test_models_are_ranked_on_shared_lengths_and_one_sharing_none_is_listed_not_ranked(tmp_path: Path) -> None:
    runs = _ranking_runs()
    rank = ranking("alpha", runs, "score")
    assert [e.model.name for e in rank.ranked] == ["a", "b"]  # mean over 1K, 2K: 0.65 vs 0.55
    assert rank.lengths == [1024, 2048]
    why = {e.model.name: w for e, w in rank.unranked}
    assert set(why) == {"c", "d"}
    assert why["c"].startswith("shares no ranking length") and "8K, 32K" in why["c"]
    assert why["d"] == "low n: no length with n >= 30"
    alpha = section(_build(tmp_path, runs), "alpha")
    assert "Ranked by the mean `score` over 1K, 2K (the lengths every ranked model has with n >= 30)" in alpha
    ranked_table, rest = alpha.split("Not ranked (listed, not compared):", 1)
    assert ranked_table.index("| **a**") < ranked_table.index("| **b**")
    assert "| **c**" not in ranked_table and "| **d**" not in ranked_table
    assert "| **c**" in rest and "| **d**" in rest  # listed under the table, not ranked
    assert "**c**: shares no ranking length" in rest and "**d**: low n" in rest


def test_no_model_is_ranked_when_no_two_share_a_length(tmp_path: Path) -> None:
    runs = [_run("a", [_task("alpha", {1024: (0.7, 40)})]), _run("c", [_task("alpha", {8192: (1.0, 40)})])]
    rank = ranking("alpha", runs, "score")
    assert rank.ranked == [] and [e.model.name for e, _ in rank.unranked] == ["a", "c"]
    alpha = section(_build(tmp_path, runs), "alpha")
    assert "Not ranked: no two models share a length where both have n >= 30" in alpha
    index = tmp_path / "site"
    update_leaderboard([tmp_path / "in"], tmp_path / "lb", now=NOW, site=index)
    assert "<td>not ranked: no shared length</td><td>—</td><td>—</td>" in (index / "index.html").read_text()


# --- noise floor and resolvable difference ----------------------------------------------------------------


def test_noise_floor_and_resolvable_difference_rows(tmp_path: Path) -> None:
    retrieve = _task("needle", {1024: (1.0, 40), 8192: (0.9, 40)}, capability="retrieve", metric="recall@1")
    multikey = _task("needle_multikey", {1024: (0.5, 100)})
    generate = _task("needle", {1024: (0.8, 40)})
    coref = _task("coref_litbank", {8192: (0.7, 40)}, capability="coref", metric="conll_f1")
    md = _build(tmp_path, [_run("r", [retrieve]), _run("g", [generate, multikey, coref])])
    needle = section(md, "needle (retrieve)")
    floor = next(line for line in needle.splitlines() if line.startswith("| *noise floor*"))
    # a random ranking of >= 8 (1K) or >= 64 (8K) chunks of 128 tokens: recall@1 <= 1/8, <= 1/64; all: n-weighted
    assert [c.strip(" |") for c in floor.split(" | ")[1:4]] == ["<=0.12", "<=0.02", f"<={(1 / 8 + 1 / 64) / 2:.2f}"]
    resolvable = next(line for line in needle.splitlines() if line.startswith("| *resolvable difference*"))
    assert resolvable.split(" | ")[1] == f"{1.959964 * math.sqrt(0.5 / 40):.2f} (n=40)" == "0.22 (n=40)"
    assert resolvable.split(" | ")[3].strip(" |") == "0.15 (n=80)"
    assert "| *noise floor* | 0.00 | 0.00 |" in section(md, "needle (generate)")  # an empty answer scores 0
    assert "| *noise floor* | 0.25 | 0.25 |" in section(md, "needle_multikey")  # 1 of 4 planted values
    assert "| *resolvable difference* | 0.14 (n=100) |" in section(md, "needle_multikey")
    assert "*noise floor*" not in section(md, "coref_litbank")  # no closed form: no row
    assert "**noise floor**: the score of a baseline that reads nothing" in md
    assert "1.96 x sqrt(0.25/n + 0.25/n)" in md


def test_noise_floor_constants_match_the_task_designs() -> None:
    from data_builders.cross_paragraph import grid as cross_paragraph_grid
    from data_builders.needle import grid as needle_grid
    from data_builders.needle import multikey as needle_multikey
    from data_builders.retrieval import docs as retrieval_docs

    for params in (needle_grid.RETRIEVAL, cross_paragraph_grid.RETRIEVAL, retrieval_docs.RETRIEVAL):
        assert params.chunk_tokens == CHUNK_TOKENS
    assert {"needle", "cross_paragraph", "retrieval"} <= CHUNKED_TASKS
    assert KEYED_NEEDLES["needle_multikey"] == needle_multikey.DISTRACTORS + 1
    assert random_chunk_bound(5, 32768) == 5 / 256 and random_chunk_bound(10, 100) == 1.0
    assert resolvable_difference(100, 100) == pytest.approx(0.1386, abs=1e-4)
    assert resolvable_difference(500, 500) == pytest.approx(0.0620, abs=1e-4)
    # a half-width of 1 or more resolves nothing on a 0-1 score: "none", never "1.39 (n=1)"
    assert resolution_cells([[1], [2, 5], [3], [4], []]) == [
        "none (n=1)",
        "0.98 (n=2)",
        "0.80 (n=3)",
        "0.69 (n=4)",
        DASH,
    ]


# --- served models and the Models table ---------------------------------------------------------------------


def _served_task() -> TaskResult:
    records = [
        {
            "data": {
                "serving": {
                    "ok": True,
                    "ttft_s": 0.05 * i,
                    "e2e_s": 0.4 * i,
                    "completion_tokens": 12,
                    "prompt_tokens": 900,
                    "attempts": 1 + (i == 2),
                    "retries_by_reason": {"429": 1} if i == 2 else {},
                    "started": float(i),
                    "finished": i + 0.4 * i,
                    "itl_s": [0.02, 0.03],
                }  # fmt: skip
            }
        }
        for i in range(1, 6)
    ] + [{"data": {"serving": {"ok": False, "error_kind": "timeout", "attempts": 3, "started": 9.0, "finished": 9.5}}}]
    stats = ServingStats.model_validate(serving_section(records))
    assert stats.ttft_s is not None and stats.throughput.output_tokens_per_s is not None
    composite = composite_score(
        output_tokens_per_s=stats.throughput.output_tokens_per_s,
        latency_p95_s=stats.ttft_s.p95,
        recall=0.8,
        recall_metric="score",
        fidelity=0.7,
        fidelity_n=5,
    )
    return _task("needle", {1024: (0.8, 40)}, serving=stats, composite=composite)


def test_served_figures_and_composite_are_on_the_page(tmp_path: Path) -> None:
    task = _served_task()
    s, c = task.serving, task.composite
    assert s is not None and c is not None and s.ttft_s is not None and s.e2e_s is not None
    runs = [_run("served", [task], kind="openai"), _run("local", [_task("needle", {1024: (0.7, 40)})])]
    md = _build(tmp_path, runs, site=tmp_path / "site")
    needle = section(md, "needle")
    row = next(line for line in needle.splitlines() if line.startswith("| **served** | 6 |")).split(" | ")
    assert "| TTFT P50 / P95 (s) | end to end P50 / P95 (s) |" in needle
    assert row[1:7] == [
        "6",
        "5 / 1 (timeout 1)",
        "1",
        f"{s.ttft_s.p50:.3g} / {s.ttft_s.p95:.3g}",
        f"{s.e2e_s.p50:.3g} / {s.e2e_s.p95:.3g}",
        f"{s.throughput.output_tokens_per_s:,.1f}",
    ]
    assert s.output_tokens_per_s is not None and row[7] == f"{s.output_tokens_per_s.p50:,.1f} |"
    comp = next(line for line in needle.splitlines() if line.startswith("| **served** |") and "tok/s)" in line)
    assert comp.split(" | ")[1] == f"{c.value:.3f}"
    assert f"{c.latency:.3f} (ttft P95 {c.latency_p95_s:.3g} s)" in comp
    assert f"{c.fidelity:.3f} (MiniLM cosine, n=5)" in comp and "0.3 / 0.25 / 0.25 / 0.2" in comp
    assert "| **local** | 1 |" not in needle  # a model that was not served has no serving row
    html = (tmp_path / "site" / "task-needle.html").read_text()
    assert "TTFT P50 / P95 (s)" in html and f"{c.value:.3f}" in html


def test_models_table_shows_the_context_window(tmp_path: Path) -> None:
    hf = _run("hf", [_task("needle", {1024: (0.7, 40)})], runtime={"window": {"tokens": 8192, "source": "config"}})
    retriever = _run("ret", [_task("needle", {1024: (0.7, 40)})], context_window=None, kind="retriever")
    md = _build(tmp_path, [hf, retriever], site=tmp_path / "site")
    models = section(md, "Models")
    assert "| context window |" in models.splitlines()[2]
    assert "| 8,192 tokens (config) |" in _line(models, "hf")[0] + " | " + " | ".join(_line(models, "hf")[1:])
    assert " | none | " in " | ".join(_line(models, "ret"))
    index = (tmp_path / "site" / "index.html").read_text()
    assert '<button type="button">context window</button>' in index and "8,192 tokens (config)" in index


# --- plots ---------------------------------------------------------------------------------------------------


def _curve(name: str, values: list[float]) -> CurveResult:
    points = [CurvePoint(x=k + 1, value=v, n=40, ci95=(v * 0.9, v * 1.1)) for k, v in enumerate(values)]
    return CurveResult(name=name, length=None, x_label="rank k", y_label="mean score at rank k", points=points)


def test_similarity_decay_gets_a_panel_per_score_scale_and_lines_stay_visible() -> None:
    runs = []
    for name, kind, settings, scale in (
        ("bm25", "bm25", {}, 3.0),
        ("minilm", "retriever", {}, 0.5),
        ("hybrid", "hybrid", {"fusion": "rrf"}, 0.016),
        ("minilm-2", "retriever", {}, 0.5),
    ):
        curves = [_curve("similarity_decay", [scale / k for k in range(1, 21)]), _curve("recall_at_k", [0.5] * 20)]
        task = _task("retrieval", {8192: (0.8, 40)}, capability="retrieve", metric="recall@5", curves=curves)
        runs.append(_run(name, [task], kind=kind, settings=settings))
    fig = curve_figure("retrieval", "similarity_decay", runs)
    assert fig is not None
    labels = sorted(ax.get_ylabel() for ax in fig.axes)
    assert labels == ["BM25 score", "cosine similarity", "fused score (rrf)"]
    cosine = next(ax for ax in fig.axes if ax.get_ylabel() == "cosine similarity")
    assert len(cosine.get_lines()) == 2
    fused = next(ax for ax in fig.axes if ax.get_ylabel() == "fused score (rrf)")
    assert fused.get_ylim()[1] < 0.1  # its own range, not a 0-1 axis that flattens it
    # identical recall curves: each its own marker and dash, so a line drawn over another still shows
    fig = curve_figure("retrieval", "recall_at_k", runs)
    assert fig is not None
    lines = fig.axes[0].get_lines()
    assert len({(line.get_marker(), line.get_linestyle()) for line in lines}) == len(lines) == 4
    assert not fig.axes[0].get_legend() and fig.legends  # the legend sits outside the panel


def test_a_pooled_curve_stops_where_its_population_would_change() -> None:
    # pooled over 8K (~80 chunks) and 32K: past rank 3 here only the longer length's samples carry a point
    points = [CurvePoint(x=k, value=1 / k, n=40 if k <= 3 else 20, ci95=(0.5 / k, 1.0)) for k in range(1, 7)]
    curve = CurveResult(name="similarity_decay", length=None, x_label="rank k", y_label="mean score", points=points)
    task = _task("retrieval", {8192: (0.8, 40)}, capability="retrieve", metric="recall@5", curves=[curve])
    fig = curve_figure("retrieval", "similarity_decay", [_run("minilm", [task], kind="retriever")])
    assert fig is not None
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_xdata()) == [1, 2, 3]
    assert "only where every pooled sample has a value" in fig._suptitle.get_text().replace("\n", " ")


def test_a_rerankers_score_curve_stops_at_its_depth_and_one_point_is_no_curve() -> None:
    # past rerank_depth a reranker's ranks carry the first stage's cosine scores: another scale, not drawn
    curve = _curve("similarity_decay", [1.0 / k for k in range(1, 31)])
    task = _task("retrieval", {8192: (0.8, 40)}, capability="retrieve", metric="recall@5", curves=[curve])
    settings = {"rerank": "maxsim", "rerank_depth": 20}
    fig = curve_figure("retrieval", "similarity_decay", [_run("maxsim", [task], kind="retriever", settings=settings)])
    assert fig is not None
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_xdata()) == list(range(1, 21))
    assert "ranks 1-20: past them, the first stage's" in fig.axes[0].get_title().replace("\n", " ")
    # pooled over lengths whose distances differ, only distance 0 is carried by every sample: no figure
    points = [CurvePoint(x=0.0, value=0.9, n=300, ci95=(0.8, 1.0)), CurvePoint(x=128.0, value=0.1, n=48, ci95=(0, 1))]
    one = CurveResult(name="recall_vs_distance", length=None, x_label="tokens", y_label="score", points=points)
    task = _task("cross", {8192: (0.8, 40)}, curves=[one])
    assert curve_figure("cross", "recall_vs_distance", [_run("a", [task])]) is None


def test_slices_are_points_not_lines_and_one_category_is_not_plotted() -> None:
    def sliced(values: dict[str, float]) -> TaskResult:
        rows = [_row("score", None, v, 40, slice={"hops": int(k)}) for k, v in values.items()]
        return _task("alpha", {1024: (0.8, 40)}, slices=rows)

    runs = [_run("a", [sliced({"2": 0.9, "3": 0.6, "4": 0.4})]), _run("b", [sliced({"2": 0.8, "3": 0.5})])]
    fig = slice_figure("alpha", "hops", runs)
    assert fig is not None
    ax = fig.axes[0]
    assert all(line.get_linestyle() == "None" for line in ax.get_lines() if len(line.get_xdata()) > 1)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "3", "4"]
    fig.canvas.draw() if fig.canvas else None
    one = [_run("a", [sliced({"2": 0.9})])]
    assert slice_figure("alpha", "hops", one) is None  # one category: the page's slice table shows it


def test_long_titles_wrap_inside_the_figure() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    task = "a_task_with_a_rather_long_name_that_goes_on"
    long_runs = [
        _run(f"model-{i}-with-a-long-name", [_task(task, {1024: (0.5, 40), 2048: (0.4, 40)})]) for i in range(2)
    ]
    fig = task_figure(task, long_runs)
    assert fig is not None
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    width = fig.bbox.width
    for ax in panel_axes(fig):
        box = ax.title.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width, ax.title.get_text()
