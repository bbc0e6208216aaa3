"""Leaderboard merge, rendering, heatmaps and the committed run-file schema, on real files in tmp_path."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import matplotlib.image
import numpy as np
import pytest

from longctx_eval.errors import ConfigError, RunFileError
from longctx_eval.leaderboard.build import (
    Leaderboard,
    dump_leaderboard,
    find_run_files,
    merge_runs,
    run_copy_name,
    schema_text,
    update_leaderboard,
    write_schema,
)
from longctx_eval.leaderboard.grid import cell
from longctx_eval.leaderboard.heatmaps import panel_axes, task_figure
from longctx_eval.leaderboard.markdown import render_markdown
from longctx_eval.leaderboard.model_page import model_page
from longctx_eval.leaderboard.pages import BoardInput
from longctx_eval.leaderboard.site_html import Links, page_html
from longctx_eval.results import (
    Coverage,
    Environment,
    MetricResult,
    ModelMeta,
    RunResult,
    Skipped,
    SuiteInfo,
    TaskResult,
    Throughput,
    json_schema,
    write_run,
)

REPO = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
LENGTHS = (1024, 4096)
DEPTHS = (0.0, 0.5, 1.0)
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def _row(metric: str, length: int | None, depth: float | None, value: float, n: int) -> MetricResult:
    lo, hi = max(0.0, value - 0.15), min(1.0, value + 0.1)
    return MetricResult(metric=metric, length=length, depth=depth, value=value, n=n, ci95=(lo, hi))


def _needle(score: float) -> TaskResult:
    """A length x depth grid, pooled rows per length, and the all-pooled row; accuracy falls with length."""
    rows = [
        _row("score", length, depth, round(score - 0.1 * i - 0.05 * depth, 3), 10)
        for i, length in enumerate(LENGTHS)
        for depth in DEPTHS
    ]
    rows += [_row("score", length, None, round(score - 0.1 * i, 3), 30) for i, length in enumerate(LENGTHS)]
    rows.append(_row("score", None, None, round(score - 0.05, 3), 60))
    rows.append(_row("empty_rate", None, None, 0.0, 60))
    return TaskResult(
        name="needle",
        version="2",
        capability="generate",
        dataset_hash="a3f1" * 16,
        n_samples=60,
        over_length=0,
        errors=0,
        results=rows,
        throughput=Throughput(samples_per_s=1.2, prompt_tokens_per_s=4900.0, seconds=50.0),
    )


def _retrieval(recall: float) -> TaskResult:
    rows = [_row("recall@5", length, None, round(recall - 0.2 * i, 3), 20) for i, length in enumerate(LENGTHS)]
    rows.append(_row("recall@5", None, None, round(recall - 0.1, 3), 40))
    return TaskResult(
        name="retrieval",
        version="1",
        capability="retrieve",
        dataset_hash="b7c2" * 16,
        n_samples=40,
        over_length=2,
        errors=0,
        results=rows,
        throughput=Throughput(samples_per_s=30.0, prompt_tokens_per_s=120000.0, seconds=1.3),
    )


def make_run(name: str, started: str, score: float = 0.9, params: int | None = 134515008) -> RunResult:
    """A realistic run file: a generate model with a needle grid and a retrieval task."""
    return RunResult(
        suite=SuiteInfo(version="0.1.0", git="abc123def4567890"),
        model=ModelMeta(
            spec=name,
            name=name,
            kind="hf",
            sha256="e3b0" * 16,
            params=params,
            dtype="float32",
            tokenizer="HuggingFaceTB/SmolLM2-135M",
            context_window=8192,
            capabilities=["generate", "loglikelihood"],
        ),
        environment=Environment(python="3.11.7", torch="2.13.0", transformers="5.24.0", platform="linux"),
        config={
            "tasks": ["needle", "retrieval", "coref"],
            "lengths": list(LENGTHS),
            "seed": 0,
            "limit": None,
        },
        config_hash="9f86" * 16,
        started=started,
        seconds=412.3,
        tasks=[_needle(score), _retrieval(score)],
        skipped=[Skipped(task="coref", reason="model lacks capability 'coref'")],
    )


def put(run: RunResult, path: Path) -> Path:
    write_run(run, path)
    return path


@pytest.fixture
def results(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    put(make_run("smollm2-135m", "2025-05-01T10:00:00+00:00", 0.7), folder / "a" / "run.json")
    put(make_run("smollm2-135m", "2025-05-02T10:00:00+00:00", 0.8), folder / "b" / "run.json")
    put(make_run("qwen-0.5b", "2025-05-01T09:00:00+00:00", 0.95, 494032768), folder / "c" / "run.json")
    return folder


def board(out: Path) -> dict:
    return json.loads((out / "leaderboard.json").read_text())


def test_merge_keeps_latest_per_model_and_both_models(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "lb"
    report = update_leaderboard([results], out, now=NOW)
    assert report.entries == 2 and report.runs_read == 3 and report.skipped == []
    data = board(out)
    assert data["schema_version"] == 1 and data["updated"] == "2025-06-01T12:00:00+00:00"
    names = [e["model"]["name"] for e in data["entries"]]
    assert names == ["qwen-0.5b", "smollm2-135m"]
    assert data["entries"][1]["started"] == "2025-05-02T10:00:00+00:00"
    # Every valid input is kept in the runs/ history under its model and start time.
    copies = sorted(p.name for p in (out / "runs").iterdir())
    assert copies == [
        "qwen-0.5b__2025-05-01T09-00-00-00-00.json",
        "smollm2-135m__2025-05-01T10-00-00-00-00.json",
        "smollm2-135m__2025-05-02T10-00-00-00-00.json",
    ]
    assert (out / "runs" / copies[2]).read_bytes() == (results / "b" / "run.json").read_bytes()


def test_merge_runs_prefers_later_start_regardless_of_order() -> None:
    new, old = make_run("m", "2025-05-02T00:00:00Z", 0.8), make_run("m", "2025-05-01T00:00:00+00:00", 0.7)
    # Each merged task records when it ran (its run's start, as the task itself did not say).
    expected = new.model_copy(update={"tasks": [t.model_copy(update={"started": new.started}) for t in new.tasks]})
    assert merge_runs([new, old]) == [expected]
    assert merge_runs([old, new]) == [expected]
    assert run_copy_name(new) == "m__2025-05-02T00-00-00Z.json"


def test_rerun_with_same_inputs_is_byte_identical(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "lb"
    update_leaderboard([results], out, now=NOW)
    first = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    update_leaderboard([results], out, now=datetime(2026, 1, 1, tzinfo=UTC))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == first


def test_corrupt_json_is_skipped_and_reported(results: Path, tmp_path: Path) -> None:
    bad = results / "broken" / "run.json"
    bad.parent.mkdir()
    bad.write_text('{"schema_version": 1, "suite": ')
    report = update_leaderboard([results], tmp_path / "lb", now=NOW)
    assert [p for p, _ in report.skipped] == [bad]
    assert "not valid JSON" in report.skipped[0][1] and "\n" not in report.skipped[0][1]
    assert report.entries == 2


@pytest.mark.parametrize(
    ("edit", "field"),
    [(lambda d: d.pop("model"), "model"), (lambda d: d["tasks"][0].update(n_samples="many"), "n_samples")],
)
def test_schema_invalid_file_is_skipped_and_reported(tmp_path: Path, edit, field: str) -> None:
    data = make_run("broken-model", "2025-05-03T00:00:00+00:00").model_dump(mode="json")
    edit(data)
    bad = tmp_path / "runs" / "broken.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(data))
    good = put(make_run("ok-model", "2025-05-03T00:00:00+00:00"), tmp_path / "ok" / "run.json")
    out = tmp_path / "lb"
    report = update_leaderboard([tmp_path / "runs", good], out, now=NOW)
    assert [p for p, _ in report.skipped] == [bad] and field in report.skipped[0][1]
    assert [e["model"]["name"] for e in board(out)["entries"]] == ["ok-model"]
    assert not list((out / "runs").glob("broken*"))


def test_existing_entries_preserved_when_an_input_is_bad(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "lb"
    update_leaderboard([results], out, now=NOW)
    bad = tmp_path / "new" / "run.json"
    bad.parent.mkdir()
    bad.write_text("not json at all")
    newer = put(make_run("llama-1b", "2025-05-05T00:00:00+00:00", 0.6), tmp_path / "new2" / "run.json")
    report = update_leaderboard([bad, newer], out, now=NOW)
    assert report.skipped[0][0] == bad and report.entries == 3
    names = [e["model"]["name"] for e in board(out)["entries"]]
    assert names == ["llama-1b", "qwen-0.5b", "smollm2-135m"]


def test_corrupt_existing_leaderboard_raises_and_is_left_untouched(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "lb"
    out.mkdir()
    corrupt = b'{"schema_version": 1, "updated": "2025-01-01", "entries": [{"model": '
    (out / "leaderboard.json").write_bytes(corrupt)
    with pytest.raises(RunFileError, match="leaderboard.json"):
        update_leaderboard([results], out, now=NOW)
    assert (out / "leaderboard.json").read_bytes() == corrupt
    assert sorted(p.name for p in out.iterdir()) == ["leaderboard.json"]


def test_markdown_lists_models_lengths_skips_and_metadata(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "lb"
    update_leaderboard([results], out, now=NOW)
    md = (out / "LEADERBOARD.md").read_text()
    for text in (
        "qwen-0.5b",
        "smollm2-135m",
        "| 1K |",
        "| 4K |",
        "| all |",
        "## needle (v2)",
        "## retrieval",
    ):
        assert text in md
    assert "0.90 [0.75, 1.00] n=60" in md  # qwen's pooled needle score
    assert "494.0M" in md and "134.5M" in md and "abc123def456" in md
    assert "| smollm2-135m | coref | — | model lacks capability 'coref' |" in md
    assert "![needle heatmap](plots/needle.png)" in md
    assert "[json](runs/qwen-0.5b__2025-05-01T09-00-00-00-00.json)" in md
    # Best pooled value first: qwen (0.95 - 0.05) above smollm2 (0.8 - 0.05).
    needle = md.split("## needle")[1].split("## retrieval")[0]
    assert needle.index("qwen-0.5b") < needle.index("smollm2-135m")


def test_markdown_dash_for_unreported_stratum() -> None:
    run = make_run("m", "2025-05-01T00:00:00+00:00")
    other = make_run("n", "2025-05-01T00:00:00+00:00")
    trimmed = other.tasks[1].model_copy(update={"results": other.tasks[1].results[1:]})
    other = other.model_copy(update={"tasks": [other.tasks[0], trimmed]})
    md = render_markdown([run, other], "2025-06-01T12:00:00+00:00", {})
    row = next(line for line in md.split("## retrieval")[1].splitlines() if line.startswith("| **n**"))
    assert row.split(" | ")[1] == "—"


def _assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 0 and pixels.shape[1] > 0


def test_pngs_are_written_and_valid(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "lb"
    report = update_leaderboard([results], out, now=NOW)
    for task in ("needle", "retrieval"):
        assert out / "plots" / f"{task}.png" in report.written
        _assert_png(out / "plots" / f"{task}.png")
    assert not list((out / "plots").glob(".*"))  # no temp files left behind


def test_depth_plot_has_one_panel_per_model_and_flat_plot_one_panel() -> None:
    runs = [make_run(f"model-{i}", "2025-05-01T00:00:00+00:00", 0.9 - 0.1 * i) for i in range(4)]
    depth_fig = task_figure("needle", runs)
    assert depth_fig is not None
    panels = panel_axes(depth_fig)
    assert sorted(ax.get_title() for ax in panels) == [f"model-{i}" for i in range(4)]
    flat_fig = task_figure("retrieval", runs)
    assert flat_fig is not None and len(panel_axes(flat_fig)) == 1
    assert task_figure("no-such-task", runs) is None


def test_find_run_files_takes_run_json_and_runs_folder_only(tmp_path: Path) -> None:
    run = make_run("m", "2025-05-01T00:00:00+00:00")
    a = put(run, tmp_path / "x" / "deep" / "run.json")
    b = put(run, tmp_path / "runs" / "m.json")
    put(run, tmp_path / "x" / "other.json")  # not a run.json, not under runs/
    put(run, tmp_path / ".cache" / "run.json")  # hidden folders are not searched
    assert find_run_files([tmp_path, a]) == sorted([a, b])


def test_committed_schema_matches_generated_and_validates(tmp_path: Path) -> None:
    committed = (REPO / "leaderboards" / "schema.json").read_text()
    assert committed == schema_text(), "regenerate with longctx_eval.leaderboard.build.write_schema"
    write_schema(tmp_path / "schema.json")
    assert (tmp_path / "schema.json").read_text() == committed
    schema = json.loads(committed)
    assert schema == json.loads(json.dumps(json_schema()))
    valid = make_run("m", "2025-05-01T00:00:00+00:00").model_dump(mode="json")
    jsonschema.validate(valid, schema)
    invalid = json.loads(json.dumps(valid))
    invalid["tasks"][0]["results"][0]["n"] = -1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(invalid, schema)
    del valid["model"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(valid, schema)


def test_missing_input_is_a_config_error_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        update_leaderboard([tmp_path / "no-such-results"], tmp_path / "lb", now=NOW)
    assert not (tmp_path / "lb").exists()


# --- merging per (model, task, capability), coverage states, stale plots, old run files -------------------


def covered_task(
    name: str,
    cells: dict[int, tuple[float | None, int, int, int]],
    *,
    version: str = "1",
    capability: str = "generate",
    metric: str = "score",
    started: str | None = None,
    warnings: tuple[str, ...] = (),
) -> TaskResult:
    """A depth-free task: per length (value or None, planned, evaluated, over_length), pooled over evaluated lengths."""
    rows, coverage = [], []
    for length, (value, planned, evaluated, over) in cells.items():
        coverage.append(Coverage(length=length, planned=planned, evaluated=evaluated, over_length=over))
        if evaluated and value is not None:
            rows.append(_row(metric, length, None, value, evaluated))
    pooled = [n for n, (v, _, e, _) in cells.items() if e and v is not None]
    if pooled:
        mean = sum(cells[n][0] or 0.0 for n in pooled) / len(pooled)
        rows.append(_row(metric, None, None, round(mean, 3), sum(cells[n][2] for n in pooled)))
    return TaskResult(
        name=name,
        version=version,
        capability=capability,
        dataset_hash="c0de" * 16,
        n_samples=sum(p for _, p, _, _ in cells.values()),
        over_length=sum(o for *_, o in cells.values()),
        errors=0,
        results=rows,
        throughput=Throughput(samples_per_s=1.0, prompt_tokens_per_s=100.0, seconds=1.0),
        started=started,
        coverage=coverage,
        pooled_lengths=pooled,
        warnings=list(warnings),
    )


def run_with(
    name: str, started: str, tasks: list[TaskResult], skipped: list[Skipped] = (), identity: str | None = None
) -> RunResult:
    base = make_run(name, started)
    model = base.model.model_copy(update={"identity_sha256": identity})
    return base.model_copy(update={"model": model, "tasks": tasks, "skipped": list(skipped)})


def section(md: str, title: str) -> str:
    return md.split(f"## {title}")[1].split("\n## ")[0]


def shown(out: Path, model: str) -> dict[tuple[str, str], dict]:
    entry = next(e for e in board(out)["entries"] if e["model"]["name"] == model)
    return {(t["name"], t["capability"]): t for t in entry["tasks"]}


FULL = {1024: (0.9, 5, 5, 0), 2048: (0.8, 5, 5, 0)}


def test_two_tasks_run_one_at_a_time_into_one_folder_both_shown(tmp_path: Path) -> None:
    folder = tmp_path / "results" / "m"
    out = tmp_path / "lb"
    first = run_with("m", "2025-05-01T00:00:00+00:00", [covered_task("alpha", FULL)])
    put(first, folder / "run.json")
    update_leaderboard([tmp_path / "results"], out, now=NOW)
    # The second run into the same folder replaced run.json with only its own task (the old runner's way).
    second = run_with("m", "2025-05-02T00:00:00+00:00", [covered_task("beta", FULL)])
    put(second, folder / "run.json")
    report = update_leaderboard([tmp_path / "results"], out, now=NOW)
    assert report.entries == 1 and report.exit_code == 0
    tasks = shown(out, "m")
    assert sorted(tasks) == [("alpha", "generate"), ("beta", "generate")]
    assert tasks[("alpha", "generate")]["started"] == "2025-05-01T00:00:00+00:00"
    md = (out / "LEADERBOARD.md").read_text()
    assert "## alpha" in md and "## beta" in md
    # Two separate run files in one fresh update give the same merged entry.
    other = tmp_path / "lb2"
    put(first, tmp_path / "two" / "a" / "run.json")
    put(second, tmp_path / "two" / "b" / "run.json")
    update_leaderboard([tmp_path / "two"], other, now=NOW)
    assert board(other)["entries"] == board(out)["entries"]


def test_task_started_orders_results_of_one_run_file(tmp_path: Path) -> None:
    # One accumulated run.json: the run started at t2, but alpha was scored at t3 and must beat the t2.5 file.
    accumulated = run_with(
        "m",
        "2025-05-02T00:00:00+00:00",
        [covered_task("alpha", FULL, started="2025-05-03T00:00:00+00:00")],
    )
    other = run_with(
        "m", "2025-05-02T12:00:00+00:00", [covered_task("alpha", {1024: (0.1, 5, 5, 0), 2048: (0.1, 5, 5, 0)})]
    )
    out = tmp_path / "lb"
    update_leaderboard([put(accumulated, tmp_path / "a.json"), put(other, tmp_path / "b.json")], out, now=NOW)
    assert shown(out, "m")[("alpha", "generate")]["results"][0]["value"] == 0.9


def test_partial_rerun_never_replaces_a_fuller_result(tmp_path: Path) -> None:
    out = tmp_path / "lb"
    full = run_with("m", "2025-05-01T00:00:00+00:00", [covered_task("alpha", FULL)])
    # --limit 1 at 1K plus a length over the window: over-window samples cover nothing, so this is partial.
    partial_cells = {1024: (0.0, 5, 1, 0), 16384: (None, 5, 0, 5)}
    partial = run_with("m", "2025-05-02T00:00:00+00:00", [covered_task("alpha", partial_cells)])
    update_leaderboard([put(full, tmp_path / "in" / "full.json")], out, now=NOW)
    update_leaderboard([put(partial, tmp_path / "in2" / "partial.json")], out, now=NOW)
    task = shown(out, "m")[("alpha", "generate")]
    assert task["n_samples"] == 10 and task["results"][0]["value"] == 0.9
    notes = board(out)["notes"]
    assert [(n["kind"], n["run"]) for n in notes] == [("not_shown", "runs/m__2025-05-02T00-00-00-00-00.json")]
    md = (out / "LEADERBOARD.md").read_text()
    alpha = section(md, "alpha")
    assert "- Not shown: m runs/m__2025-05-02T00-00-00-00-00.json: newer but covers less (v1, n=1 at 1K)" in alpha
    assert "never replaces a fuller one" in md  # the rule is stated on the page
    # The note survives an update that does not name the partial run again (it lives in runs/).
    update_leaderboard([tmp_path / "in" / "full.json"], out, now=NOW)
    assert board(out)["notes"] == notes
    # A later full rerun is shown and the note goes: nothing partial is hidden any more.
    again = run_with("m", "2025-05-03T00:00:00+00:00", [covered_task("alpha", {**FULL, 1024: (0.7, 5, 5, 0)})])
    update_leaderboard([put(again, tmp_path / "in3" / "again.json")], out, now=NOW)
    assert shown(out, "m")[("alpha", "generate")]["results"][0]["value"] == 0.7
    assert board(out)["notes"] == []


def test_newer_task_version_wins_and_says_what_it_replaced(tmp_path: Path) -> None:
    out = tmp_path / "lb"
    full = run_with("m", "2025-05-01T00:00:00+00:00", [covered_task("alpha", FULL, version="2")])
    newer = run_with("m", "2025-05-02T00:00:00+00:00", [covered_task("alpha", {1024: (0.5, 5, 1, 0)}, version="3")])
    update_leaderboard([put(full, tmp_path / "a.json"), put(newer, tmp_path / "b.json")], out, now=NOW)
    assert shown(out, "m")[("alpha", "generate")]["version"] == "3"
    (note,) = board(out)["notes"]
    assert note["kind"] == "replaced" and note["run"] == "runs/m__2025-05-01T00-00-00-00-00.json"
    assert "another task version" in note["reason"] and "v2, n=10 at 1K, 2K" in note["reason"]
    assert "- Replaced: m runs/m__2025-05-01T00-00-00-00-00.json" in (out / "LEADERBOARD.md").read_text()


def test_a_merge_note_labels_lengths_as_the_tables_do() -> None:
    """1048576 tokens is '1M' in a Not shown / Replaced note, as in the table heads (`length_label`)."""
    from longctx_eval.leaderboard.merge import describe

    task = covered_task("alpha", {8192: (0.9, 5, 5, 0), 1048576: (0.8, 2, 2, 0)})
    assert describe(task) == "v1, n=7 at 8K, 1M"


def test_same_name_different_model_identity_is_not_merged(tmp_path: Path) -> None:
    out = tmp_path / "lb"
    old = run_with("m", "2025-05-01T00:00:00+00:00", [covered_task("alpha", FULL)], identity="a" * 64)
    new = run_with("m", "2025-05-02T00:00:00+00:00", [covered_task("beta", FULL)], identity="b" * 64)
    update_leaderboard([put(old, tmp_path / "a.json"), put(new, tmp_path / "b.json")], out, now=NOW)
    assert sorted(shown(out, "m")) == [("beta", "generate")]
    (note,) = board(out)["notes"]
    assert note["kind"] == "other_model" and "?name=" in note["reason"]
    assert "## Not shown" in (out / "LEADERBOARD.md").read_text()


def test_over_window_not_evaluated_and_partial_cells(tmp_path: Path) -> None:
    cells = {1024: (0.9, 5, 5, 0), 2048: (0.6, 5, 2, 0), 4096: (None, 5, 0, 0), 16384: (None, 5, 0, 5)}
    task = covered_task("alpha", cells, warnings=("scorer never produced the primary metric 'score'",))
    out = tmp_path / "lb"
    run = put(run_with("m", "2025-05-01T00:00:00+00:00", [task]), tmp_path / "m.json")
    update_leaderboard([run], out, now=NOW, min_n=1)  # cells of 2 and 5 samples: no low-n marks here
    alpha = section((out / "LEADERBOARD.md").read_text(), "alpha")
    header = next(line for line in alpha.splitlines() if line.startswith("| model"))
    assert header == "| model | 1K | 2K | 4K | 16K | all (1K, 2K) |"  # the pooled column names what it pools
    row = next(line for line in alpha.splitlines() if line.startswith("| **m**")).split(" | ")
    assert row[1] == "0.90 [0.75, 1.00] n=5"
    assert row[2] == "0.60 n=2/5, no interval (n < 5)"  # 2 samples: no interval
    assert row[3] == "not evaluated"
    assert row[4] == "n/a (over window)"
    assert row[5].startswith("0.75 ") and row[5].endswith("n=7/10 |")  # 16K and 4K are not pooled
    assert "m 5 over-length, 0 failed of 20" in alpha  # the run's over-length count is still shown
    assert "Warnings:\n\n- m: scorer never produced the primary metric 'score'." in alpha


def test_a_limited_cell_is_not_partial_when_the_limit_was_run_whole(tmp_path: Path) -> None:
    # limit=2: at 1K the 2 samples the limit took of 5 were all run; at 2K only 1 of them was (an interrupted run).
    cells = {1024: (0.9, 5, 2, 0), 2048: (0.6, 5, 1, 0), 4096: (0.5, 1, 1, 0)}
    task = covered_task("alpha", cells).model_copy(update={"limit": 2})
    entry = run_with("m", "2025-05-01T00:00:00+00:00", [task])
    assert not cell(task, "score", 1024, None).partial and cell(task, "score", 2048, None).partial
    assert not cell(task, "score", 4096, None).partial  # the grid had fewer than the limit
    out = tmp_path / "lb"
    update_leaderboard([put(entry, tmp_path / "m.json")], out, now=NOW, min_n=1)
    alpha = section((out / "LEADERBOARD.md").read_text(), "alpha")
    row = next(line for line in alpha.splitlines() if line.startswith("| **m**")).split(" | ")
    assert row[1].endswith("n=2, no interval (n < 5) (limit: 2 of 5)")
    assert row[2].endswith("n=1/2, no interval (n < 5) (limit: 2 of 5)")  # partial against what the limit took
    assert row[3].endswith("n=1, no interval (n < 5)")
    assert row[4].endswith("n=4/5, no interval (n < 5) (limit: 5 of 11) |")  # pooled: 2 + 2 + 1 expected
    fig = task_figure("alpha", [entry], 1)
    assert fig is not None
    assert [t.get_text() for t in panel_axes(fig)[0].texts] == ["0.90", "0.60*", "0.50", "0.67*"]
    # The model page's coverage table marks only the cut-short length as partial.
    page = page_html(model_page(entry, BoardInput([entry], "now", min_n=1)), Links({}, {}, {}, {}))
    assert page.count('class="partial"') == 3  # 2K's stratum, the task's evaluated count and its pooled value


def test_heatmap_hatches_over_window_and_marks_not_evaluated() -> None:
    cells = {1024: (0.9, 5, 5, 0), 2048: (0.0, 5, 2, 0), 4096: (None, 5, 0, 0), 16384: (None, 5, 0, 5)}
    fig = task_figure("alpha", [run_with("m", "2025-05-01T00:00:00+00:00", [covered_task("alpha", cells)])], 1)
    assert fig is not None
    (ax,) = panel_axes(fig)
    hatched = [p for p in ax.patches if p.get_hatch()]
    dotted = [p for p in ax.patches if not p.get_hatch() and p.get_linestyle() == ":"]
    assert len(hatched) == 1 and len(dotted) == 1
    assert hatched[0].get_xy() == (3 - 0.5, -0.5)  # the 16K column
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["0.90", "0.00*", "n/e", "n/a", "0.45*"]  # 0.00 is a real score, n/a is not
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == [
        "n/a: over the model's context window",
        "n/e: not evaluated (--limit)",
        "*: partial, fewer samples than planned",
    ]
    # The over-window cell has no colour of its own under the hatch: its value is NaN, not 0.
    image = ax.get_images()[0]
    assert np.isnan(image.get_array().filled(np.nan)[0, 3])


def test_sorting_compares_models_on_shared_lengths_only(tmp_path: Path) -> None:
    # short: 1K only, pooled 0.6. wide: 1K 0.9 and 8K 0.2, pooled 0.55. Pooled order would put short first.
    short = run_with(
        "short", "2025-05-01T00:00:00+00:00", [covered_task("alpha", {1024: (0.6, 40, 40, 0), 8192: (None, 5, 0, 5)})]
    )
    wide = run_with(
        "wide", "2025-05-01T00:00:00+00:00", [covered_task("alpha", {1024: (0.9, 40, 40, 0), 8192: (0.2, 40, 40, 0)})]
    )
    out = tmp_path / "lb"
    update_leaderboard([put(short, tmp_path / "s.json"), put(wide, tmp_path / "w.json")], out, now=NOW)
    alpha = section((out / "LEADERBOARD.md").read_text(), "alpha")
    assert "Ranked by the mean `score` over 1K (the lengths every ranked model has with n >= 30)" in alpha
    assert alpha.index("| **wide**") < alpha.index("| **short**")
    assert "Not ranked" not in alpha
    # Pooled sets differ, so each "all" cell names its own lengths.
    assert "| all |" in alpha and " over 1K |" in alpha and " over 1K, 8K |" in alpha


def test_stale_plot_is_removed_when_a_task_plot_splits_by_capability(tmp_path: Path) -> None:
    out = tmp_path / "lb"
    gen = run_with("gen", "2025-05-01T00:00:00+00:00", [covered_task("needle", FULL)])
    update_leaderboard([put(gen, tmp_path / "gen.json")], out, now=NOW)
    assert (out / "plots" / "needle.png").is_file()
    for name, data in (("logo.png", b"not ours"), ("notes.txt", b"keep"), (".needle.png.x.tmp", b"tmp")):
        (out / "plots" / name).write_bytes(data)
    ret = run_with(
        "ret", "2025-05-01T00:00:00+00:00", [covered_task("needle", FULL, capability="retrieve", metric="recall@1")]
    )
    report = update_leaderboard([put(ret, tmp_path / "ret.json")], out, now=NOW)
    assert report.removed == [out / "plots" / "needle.png"]
    assert sorted(p.name for p in (out / "plots").iterdir()) == [
        ".needle.png.x.tmp",
        "logo.png",
        "needle-generate.png",
        "needle-retrieve.png",
        "notes.txt",
    ]
    md = (out / "LEADERBOARD.md").read_text()
    assert "plots/needle-generate.png" in md and "plots/needle.png" not in md


def test_skip_cleared_by_a_later_score_and_kind_shown(tmp_path: Path) -> None:
    skip = Skipped(task="alpha", reason="no coreference data", kind="missing_data")
    first = run_with("m", "2025-05-01T00:00:00+00:00", [covered_task("beta", FULL)], [skip])
    other = run_with("n", "2025-05-01T00:00:00+00:00", [covered_task("beta", FULL)], [skip])
    out = tmp_path / "lb"
    update_leaderboard([put(first, tmp_path / "m1.json"), put(other, tmp_path / "n.json")], out, now=NOW)
    skipped = section((out / "LEADERBOARD.md").read_text(), "Skipped")
    assert "| m | alpha | missing_data | no coreference data |" in skipped
    later = run_with("m", "2025-05-02T00:00:00+00:00", [covered_task("alpha", FULL)])
    update_leaderboard([put(later, tmp_path / "m2.json")], out, now=NOW)
    skipped = section((out / "LEADERBOARD.md").read_text(), "Skipped")
    assert "| m | alpha |" not in skipped and "| n | alpha | missing_data | no coreference data |" in skipped
    assert sorted(shown(out, "m")) == [("alpha", "generate"), ("beta", "generate")]


def test_committed_old_run_files_still_merge_and_render(tmp_path: Path) -> None:
    runs = REPO / "tests" / "data" / "runs_before_coverage"
    old = tmp_path / "old" / "runs"
    old.mkdir(parents=True)
    shutil.copy(runs / "smollm2-135m__2026-11-29T22-39-51-00-00.json", old / "smollm2.json")
    shutil.copy(runs / "bm25__2026-11-29T22-39-51-00-00.json", old / "bm25.json")
    # A new-style run of the same model on another task merges with the old file.
    new = run_with("smollm2-135m", "2026-12-01T00:00:00+00:00", [covered_task("alpha", FULL)])
    out = tmp_path / "lb"
    report = update_leaderboard([tmp_path / "old", put(new, tmp_path / "new.json")], out, now=NOW)
    assert report.skipped == [] and report.entries == 2
    names = {name for name, _ in shown(out, "smollm2-135m")}
    assert names == {"alpha", "needle", "coref_synthetic", "posprobe"}
    needle = section((out / "LEADERBOARD.md").read_text(), "needle (generate)")
    row = next(line for line in needle.splitlines() if line.startswith("| **smollm2-135m**"))
    # No coverage in the old file: today's rendering (over-length scored as 0 with its count below).
    assert "0.00 [0.00, 0.00] n=5" in row and "| all |" in needle
    assert "smollm2-135m 5 over-length, 0 failed of 20" in needle


def test_nan_never_reaches_leaderboard_json(tmp_path: Path) -> None:
    run = make_run("m", "2025-05-01T00:00:00+00:00")
    row = run.tasks[0].results[0].model_copy(update={"value": float("nan")})  # bypasses validation
    task = run.tasks[0].model_copy(update={"results": [row]})
    bad = run.model_copy(update={"tasks": [task]})
    with pytest.raises(RunFileError, match="non-finite"):
        dump_leaderboard(
            Leaderboard(updated="2025-06-01T12:00:00+00:00", entries=[run]).model_copy(update={"entries": [bad]})
        )
    with pytest.raises(RunFileError, match="non-finite"):
        write_run(bad, tmp_path / "run.json")
    assert not (tmp_path / "run.json").exists()


def test_corrupt_input_sets_exit_code_2_and_still_renders(tmp_path: Path) -> None:
    bad = tmp_path / "in" / "run.json"
    bad.parent.mkdir()
    bad.write_text('{"schema_version": 1, "tasks": [NaN]}')
    good = put(make_run("m", "2025-05-01T00:00:00+00:00"), tmp_path / "ok" / "run.json")
    report = update_leaderboard([bad, good], tmp_path / "lb", now=NOW)
    assert report.exit_code == 2 and report.entries == 1
    assert [p for p, _ in report.skipped] == [bad] and "tasks.0" in report.skipped[0][1]
    assert (tmp_path / "lb" / "LEADERBOARD.md").is_file()


def test_per_length_summary_coverage_next_to_depths_is_not_counted_twice(tmp_path: Path) -> None:
    # The scorer writes per (length, depth) entries and a depth-free summary per length, like scoring.coverage.
    coverage = [Coverage(length=n, depth=d, planned=2, evaluated=1, over_length=0) for n in LENGTHS for d in DEPTHS]
    coverage += [Coverage(length=n, depth=None, planned=6, evaluated=3, over_length=0) for n in LENGTHS]
    limited = _needle(0.9).model_copy(update={"coverage": coverage, "pooled_lengths": list(LENGTHS)})
    run = make_run("m", "2025-05-02T00:00:00+00:00").model_copy(update={"tasks": [limited]})
    full = make_run("m", "2025-05-01T00:00:00+00:00")  # no coverage: counts from its rows (n=30 per length)
    out = tmp_path / "lb"
    update_leaderboard([put(full, tmp_path / "full.json"), put(run, tmp_path / "limited.json")], out, now=NOW)
    md = (out / "LEADERBOARD.md").read_text()
    row = next(line for line in section(md, "needle").splitlines() if line.startswith("| **m**")).split(" | ")
    assert row[1] == "0.90 [0.75, 1.00] n=30"  # the full (older) run stays shown
    (note,) = board(out)["notes"]
    assert note["kind"] == "not_shown" and "(v2, n=6 at 1K, 4K)" in note["reason"]
    fig = task_figure("needle", [run], 1)
    assert fig is not None
    texts = [t.get_text() for t in panel_axes(fig)[0].texts]
    assert all(t.endswith("*") for t in texts)  # every cell is partial: 1 of 2 samples
    md = render_markdown([run], NOW.isoformat(), {}, min_n=1)
    row = next(line for line in section(md, "needle").splitlines() if line.startswith("| **m**")).split(" | ")
    assert row[1].endswith("/6")  # 6 planned at 1K (3 depths x 2), not 12
