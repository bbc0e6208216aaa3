"""Leaderboard merge, rendering, heatmaps and the committed run-file schema, on real files in tmp_path."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import matplotlib.image
import pytest

from longctx_eval.errors import ConfigError, RunFileError
from longctx_eval.leaderboard import (
    find_run_files,
    merge_runs,
    run_copy_name,
    schema_text,
    update_leaderboard,
    write_schema,
)
from longctx_eval.leaderboard_render import render_markdown
from longctx_eval.plots import panel_axes, task_figure
from longctx_eval.results import (
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

REPO = Path(__file__).resolve().parents[1]
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
    new, old = make_run("m", "2025-05-02T00:00:00Z"), make_run("m", "2025-05-01T00:00:00+00:00")
    assert merge_runs([new, old]) == [new]
    assert merge_runs([old, new]) == [new]
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
    assert "| smollm2-135m | coref | model lacks capability 'coref' |" in md
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
    assert committed == schema_text(), "regenerate with longctx_eval.leaderboard.write_schema"
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
