"""Strict run-file validation on real files: no coercion, no NaN, one-line errors naming file and field."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from longctx_eval.errors import RunFileError
from longctx_eval.results import Coverage, RunResult, Skipped, TaskResult, read_run, write_run

REPO = Path(__file__).resolve().parents[2]
COMMITTED_RUNS = sorted((REPO / "tests" / "data" / "runs_before_coverage").glob("*.json"))
SCHEMA = json.loads((REPO / "leaderboards" / "schema.json").read_text())


def _valid() -> dict:
    """A new-style run file as JSON data: every new optional field filled in."""
    return {
        "schema_version": 1,
        "suite": {"version": "0.1.0", "git": None},
        "model": {
            "spec": "bm25?name=b",
            "name": "b",
            "kind": "bm25",
            "tokenizer": "smollm2-135m",
            "capabilities": ["retrieve"],
            "settings": {"k1": 1.2, "b": 0.75},
            "identity_sha256": "f" * 64,
        },
        "environment": {"python": "3.11.7", "platform": "linux"},
        "config": {"seed": 0, "tasks": [{"name": "needle", "lengths": [1024]}]},
        "config_hash": "9" * 64,
        "started": "2025-05-01T00:00:00+00:00",
        "seconds": 3,  # an integer where a float belongs is fine
        "tasks": [
            {
                "name": "needle",
                "version": "3",
                "capability": "retrieve",
                "dataset_hash": "a" * 64,
                "n_samples": 10,
                "over_length": 5,
                "errors": 0,
                "results": [
                    {"metric": "recall@1", "length": 1024, "depth": None, "value": 1, "n": 5, "ci95": [1, 1]},
                    {"metric": "recall@1", "length": None, "depth": None, "value": 0.25, "n": 5, "ci95": [0.0, 0.5]},
                ],
                "throughput": {"samples_per_s": 2.5, "prompt_tokens_per_s": 100.0, "seconds": 2.0},
                "args": {"source": "synthetic"},
                "lengths": [1024, 16384],
                "limit": None,
                "seed": 0,
                "config_hash": "c" * 64,
                "started": "2025-05-01T00:00:01+00:00",
                "scorer_sha256": "d" * 64,
                "coverage": [
                    {"length": 1024, "depth": 0.5, "planned": 5, "evaluated": 5, "over_length": 0},
                    {"length": 16384, "depth": 0.5, "planned": 5, "evaluated": 0, "over_length": 5},
                ],
                "pooled_lengths": [1024],
                "warnings": ["scorer never produced the primary metric 'recall@1'"],
            }
        ],
        "skipped": [{"task": "coref_ontonotes", "reason": "no OntoNotes path given", "kind": "missing_data"}],
    }


def _write(tmp_path: Path, data: dict | str, name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_new_style_file_validates_and_round_trips(tmp_path: Path) -> None:
    run = read_run(_write(tmp_path, _valid()))
    task = run.tasks[0]
    assert task.results[0].ci95 == (1.0, 1.0) and isinstance(task.results[0].value, float)
    assert task.coverage[1] == Coverage(length=16384, depth=0.5, planned=5, evaluated=0, over_length=5)
    assert run.skipped == [Skipped(task="coref_ontonotes", reason="no OntoNotes path given", kind="missing_data")]
    assert run.model.settings == {"k1": 1.2, "b": 0.75}
    write_run(run, tmp_path / "again.json")
    assert read_run(tmp_path / "again.json") == run
    jsonschema.validate(json.loads((tmp_path / "again.json").read_text()), SCHEMA)


@pytest.mark.parametrize("path", COMMITTED_RUNS, ids=lambda p: p.name)
def test_committed_old_run_files_still_validate(path: Path) -> None:
    run = read_run(path)
    assert run.tasks and all(t.coverage == [] and t.started is None for t in run.tasks)


def _set(data: dict, dotted: str, value: object) -> dict:
    *parents, last = dotted.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = value
    return data


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tasks.0.results.1.value", "0.25"),  # a string for a float
        ("tasks.0.results.1.value", True),  # a boolean for a float
        ("tasks.0.n_samples", True),  # a boolean for an int
        ("tasks.0.results.1.n", "15"),  # a string for an int
        ("tasks.0.results.1.n", 15.0),  # a float for an int
        ("tasks.0.coverage.0.planned", "5"),
        ("tasks.0.limit", "2"),
        ("tasks.0.pooled_lengths.0", "1024"),
        ("tasks.0.results.1.ci95", "0.0,0.5"),
        ("skipped.0.kind", 3),
        ("seconds", "3"),
        ("tasks.0.coverage.1.evaluated", 1),  # 1 evaluated + 5 over length > 5 planned
    ],
)
def test_no_coercion_and_one_line_errors_naming_path_and_field(tmp_path: Path, field: str, value: object) -> None:
    path = _write(tmp_path, _set(_valid(), field, value))
    with pytest.raises(RunFileError) as info:
        read_run(path)
    message = str(info.value)
    assert message.startswith(f"{path}: field ") and "\n" not in message
    where = field if field != "tasks.0.coverage.1.evaluated" else "tasks.0.coverage.1"
    assert repr(where) in message


@pytest.mark.parametrize(
    ("token", "field"),
    [
        ("NaN", "tasks.0.results.1.value"),
        ("Infinity", "tasks.0.results.1.ci95.1"),
        ("-Infinity", "seconds"),
        ("1e999", "tasks.0.throughput.seconds"),
        ("NaN", "config.seed"),  # also inside the free-form config
        ("NaN", "tasks.0.args.source"),
    ],
)
def test_nan_and_infinity_are_rejected_on_read(tmp_path: Path, token: str, field: str) -> None:
    data = _set(_valid(), field, "@@")
    path = _write(tmp_path, json.dumps(data).replace('"@@"', token))
    assert token in path.read_text()
    with pytest.raises(RunFileError, match=rf"^{path}: field '{field}': NaN or Infinity"):
        read_run(path)


def test_nan_is_never_written(tmp_path: Path) -> None:
    run = read_run(_write(tmp_path, _valid()))
    # model_copy skips validation: the only way a NaN can get into a record after it is built.
    task = run.tasks[0].model_copy(
        update={"throughput": run.tasks[0].throughput.model_copy(update={"seconds": float("nan")})}
    )
    with pytest.raises(RunFileError, match="non-finite"):
        write_run(run.model_copy(update={"tasks": [task]}), tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()
    with pytest.raises(ValueError, match="finite"):
        TaskResult.model_validate(
            {**run.tasks[0].model_dump(), "n_samples": 1, "results": [], "over_length": float("inf")}
        )


def test_unknown_field_and_wrong_schema_version_and_bad_bytes(tmp_path: Path) -> None:
    data = _valid()
    data["tasks"][0]["coverge"] = []
    with pytest.raises(RunFileError, match=r"field 'tasks.0.coverge': Extra inputs are not permitted"):
        read_run(_write(tmp_path, data))
    with pytest.raises(RunFileError, match="schema_version is 2; expected 1"):
        read_run(_write(tmp_path, {**_valid(), "schema_version": 2}))
    raw = tmp_path / "torn.json"
    raw.write_bytes(json.dumps(_valid()).encode()[:50] + b"\xe2\x82")
    with pytest.raises(RunFileError, match=rf"^{raw}"):
        read_run(raw)


def test_python_construction_still_accepts_lists_and_ints() -> None:
    """The runner builds records from Python values: ints for floats and lists for the interval stay fine."""
    run = RunResult.model_validate(_valid())
    assert run.tasks[0].results[0].ci95 == (1.0, 1.0)
