"""Slices, curves, contrasts, throughput and the per-sample scores file, through `run` and `score` on real files.

The probe task's per-sample scores are fixed by its data (the scorer reads them from the gold), so every
number below is computed by hand from the SCORES table.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import textwrap
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from longctx_eval.cli import main
from longctx_eval.errors import TaskDefinitionError
from longctx_eval.metrics.aggregate import column_mean, mean
from longctx_eval.metrics.bootstrap import bootstrap_ci
from longctx_eval.metrics.contrast import contrast
from longctx_eval.sample import Sample, Score
from longctx_eval.scoring.contrasts import contrast_results
from longctx_eval.scoring.resample import column_means_ci

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "leaderboards" / "schema.json").read_text())

PROBE = '''
"""Breakdown probe: per-sample scores fixed by the data, so every slice, curve and contrast is known by hand."""

from longctx_eval import Prediction, Request, Sample, Score, Task, any_of, contrast, curve, mean, task

SCORES = {64: [1, 1, 1, 1, 0, 1, 0, 1], 128: [1, 1, 1, 0, 0, 0, 1, 0], 256: [1, 1, 1, 1, 1, 1, 1, 1]}


@task(name="probe", version="1", requires=any_of("generate"), default_lengths=[64, 128, 256], description="probe")
def probe(lengths, seed=0, tokenizer=None, breakdowns=True):
    def samples():
        for length in lengths:
            for i, value in enumerate(SCORES.get(length, [1] * 8)):
                meta = {"target_tokens": length, "hops": 2 + i % 2, "placement": "same" if i < 4 else "cross"}
                if i < 6:
                    meta["bucket"] = "near" if i < 3 else "far"
                if i == 7:
                    meta["bucket"] = [1, 2]  # not a value results can be sliced by
                yield Sample(
                    id=f"{length}-{i}",
                    context="word " * length,
                    question=f"q{i}?",
                    gold={"answers": [f"a{i}"], "value": value, "i": i},
                    metadata=meta,
                )

    def prompt(sample):
        return Request(sample.id, sample.context + sample.question, sample.context, sample.question, max_new_tokens=2)

    def score(sample, prediction):
        i = sample.gold["i"]
        rank = i % 4 + 1
        values = {"score": float(sample.gold["value"])}
        values |= {f"recall@{k}": float(rank <= k) for k in (1, 2, 3)}
        if i == 7:
            del values["recall@3"]  # a curve point is a mean over the samples carrying its field
        return Score(values, parsed=(prediction.text or "").upper())

    if not breakdowns:
        return Task(dataset=samples, prompt=prompt, scorer=score, metrics=[mean("score"), mean("recall@1")])
    return Task(
        dataset=samples,
        prompt=prompt,
        scorer=score,
        metrics=[mean("score"), mean("recall@1")],
        slices=("hops", "placement", "bucket"),
        curves=[curve("recall_at_k", ["recall@1", "recall@2", "recall@3"], [1, 2, 3], "K", "Recall@K")],
        contrasts=[
            contrast("same_vs_cross", "score", "placement", "same", "cross"),
            contrast("never", "score", "placement", "same", "nowhere"),
        ],
    )
'''

PARTS = '''
"""Two questions per sample: the scores file keeps each part's answer."""

from longctx_eval import Prediction, Request, Sample, Score, Task, any_of, mean, task


@task(name="probe_parts", version="1", requires=any_of("generate"), default_lengths=[64], description="parts")
def probe_parts(lengths, seed=0, tokenizer=None):
    def samples():
        for length in lengths:
            for i in range(2):
                yield Sample(f"{length}-{i}", "word " * length, "q", {"answers": [f"x{i}", f"y{i}"]},
                             {"target_tokens": length})

    def prompt(sample):
        return [Request(sample.id, sample.context + q, sample.context, q, max_new_tokens=2) for q in ("q1", "q2")]

    def oracle(sample):
        return Prediction(parts=tuple(Prediction(text=a) for a in sample.gold["answers"]))

    def score(sample, prediction):
        texts = [p.text for p in prediction.parts]
        return Score({"score": float(texts == list(sample.gold["answers"]))}, parsed="|".join(texts))

    return Task(dataset=samples, prompt=prompt, scorer=score, metrics=[mean("score")], oracle=oracle)
'''


def write_probe(folder: Path) -> Path:
    """A plugin folder holding the probe tasks (also used by the effective-length and leaderboard tests)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "probe.py").write_text(textwrap.dedent(PROBE))
    (folder / "probe_parts.py").write_text(textwrap.dedent(PARTS))
    return folder


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory) -> tuple[Path, Path, dict, str]:
    """The probe tasks run once by the oracle: (plugin folder, run folder, probe's task entry, summary text)."""
    root = tmp_path_factory.mktemp("breakdowns")
    plugins = write_probe(root / "plugins")
    out = root / "out"
    args = ["run", "--model", "oracle", "--tasks", "probe,probe_parts", "--include-path", str(plugins)]
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):  # the console writes to sys.stderr as it is at each call
        assert main([*args, "--out", str(out)]) == 0
    run = json.loads((out / "oracle" / "run.json").read_text())
    jsonschema.validate(run, SCHEMA)
    task = next(t for t in run["tasks"] if t["name"] == "probe")
    return plugins, out / "oracle", task, buf.getvalue()


def _slice(task: dict, key: str, value: object, length: int | None, metric: str = "score") -> dict:
    rows = [
        r
        for r in task["slices"]
        if r["metric"] == metric and r["length"] == length and r["slice"] == {key: value} and r["depth"] is None
    ]
    assert len(rows) == 1, (key, value, length, rows)
    return rows[0]


def test_slice_rows_match_hand_computed_values(oracle_run):
    _, _, task, _ = oracle_run
    assert _slice(task, "hops", 2, None)["value"] == 0.75 and _slice(task, "hops", 2, None)["n"] == 12
    assert _slice(task, "hops", 2, 64)["value"] == 0.5 and _slice(task, "hops", 3, 64)["value"] == 1.0
    assert _slice(task, "placement", "same", None)["value"] == pytest.approx(11 / 12, abs=1e-6)
    assert _slice(task, "placement", "cross", 128)["value"] == 0.25
    # samples lacking the key (i = 6) or holding a list (i = 7) are left out of that key's rows
    assert _slice(task, "bucket", "near", None) | {"ci95": None} == {
        "metric": "score",
        "length": None,
        "depth": None,
        "value": 1.0,
        "n": 9,
        "clusters": 9,  # the probe's samples name no cluster: each is its own
        "n_eff": None,
        "ci95": None,
        "slice": {"bucket": "near"},
    }
    assert _slice(task, "bucket", "far", None)["value"] == pytest.approx(5 / 9, abs=1e-6)
    assert _slice(task, "bucket", "far", None)["n"] == 9
    assert any("'bucket'" in w and "3 sample(s)" in w for w in task["warnings"])  # i = 7 at each length
    # every task metric is sliced, none of the standard ones; ints stay ints
    assert {r["metric"] for r in task["slices"]} == {"score", "recall@1"}
    assert all(type(r["slice"]["hops"]) is int for r in task["slices"] if "hops" in r["slice"])


def test_slices_leave_the_unsliced_rows_as_they_were(oracle_run, tmp_path):
    plugins, _, task, _ = oracle_run
    args = ["run", "--model", "oracle", "--tasks", "probe", "--include-path", str(plugins)]
    assert main([*args, "--task-arg", "probe.breakdowns=false", "--out", str(tmp_path)]) == 0
    plain = json.loads((tmp_path / "oracle" / "run.json").read_text())["tasks"][0]
    assert plain["results"] == task["results"]
    assert all(r["slice"] is None for r in task["results"])
    assert plain["slices"] == [] and plain["curves"] == [] and plain["contrasts"] == []


def test_curve_points_are_the_hand_means(oracle_run):
    _, _, task, _ = oracle_run
    curves = {c["length"]: c for c in task["curves"] if c["name"] == "recall_at_k"}
    assert sorted(curves, key=lambda n: n or 0) == [None, 64, 128, 256]
    pooled = curves[None]
    assert (pooled["x_label"], pooled["y_label"]) == ("K", "Recall@K")
    got = [(p["x"], p["value"], p["n"]) for p in pooled["points"]]
    assert got == [(1.0, 0.25, 24), (2.0, 0.5, 24), (3.0, pytest.approx(18 / 21, abs=1e-6), 21)]
    assert [p["value"] for p in curves[64]["points"]] == [0.25, 0.5, pytest.approx(6 / 7, abs=1e-6)]
    # a point every sample carries has the same interval as the metric row of that field
    recall1 = next(r for r in task["results"] if r["metric"] == "recall@1" and r["length"] is None)
    assert pooled["points"][0]["ci95"] == recall1["ci95"]


def test_column_means_ci_equals_the_scalar_bootstrap_and_skips_missing_values():
    rng = np.random.default_rng(3)
    values = rng.random((300, 100))
    values[rng.random(values.shape) < 0.2] = np.nan
    means, n, lo, hi = column_means_ci(values, seed=5)
    for j in (0, 37, 99):
        col = values[:, j][~np.isnan(values[:, j])]
        assert n[j] == col.size and means[j] == pytest.approx(col.mean())
        assert lo[j] <= means[j] <= hi[j]
    full = rng.random((50, 3))
    _, _, lo, hi = column_means_ci(full, seed=0)
    assert (lo[1], hi[1]) == pytest.approx(bootstrap_ci(full[:, [1]], column_mean, seed=0))
    empty = np.full((4, 2), np.nan)
    means, n, _, _ = column_means_ci(empty)
    assert list(n) == [0, 0] and np.isnan(means).all()


def test_contrast_rows_hand_values_and_omitted_sides(oracle_run):
    _, _, task, _ = oracle_run
    rows = {c["length"]: c for c in task["contrasts"] if c["name"] == "same_vs_cross"}
    pooled = rows[None]
    assert (pooled["value_a"], pooled["n_a"]) == (pytest.approx(11 / 12, abs=1e-6), 12)
    assert (pooled["value_b"], pooled["n_b"]) == (pytest.approx(7 / 12, abs=1e-6), 12)
    assert pooled["difference"] == pytest.approx(1 / 3, abs=1e-6)
    assert pooled["ci95"][0] <= pooled["difference"] <= pooled["ci95"][1]
    assert rows[64]["difference"] == 0.5 and rows[256]["difference"] == 0.0 and rows[256]["ci95"] == [0.0, 0.0]
    assert not [c for c in task["contrasts"] if c["name"] == "never"]  # one side has no sample


def test_contrast_interval_contains_the_truth_and_is_seeded():
    rng = np.random.default_rng(11)
    scored = [
        (
            Sample(f"s{i}", "", "", {}, {"target_tokens": 1024, "placement": side}),
            Score({"score": float(rng.random() < p), "over_length": 0.0}),
        )
        for i, (side, p) in enumerate([("same", 0.9)] * 300 + [("cross", 0.5)] * 300)
    ]
    declared = [contrast("drop", "score", "placement", "same", "cross")]
    first = contrast_results(scored, declared, {"score": mean("score")})
    assert first == contrast_results(scored, declared, {"score": mean("score")})
    pooled = first[0]
    assert pooled.ci95[0] <= 0.4 <= pooled.ci95[1]
    assert pooled.ci95[1] - pooled.ci95[0] < 0.2
    with pytest.raises(TaskDefinitionError, match="names metric 'accuracy'"):
        contrast_results(scored, [contrast("x", "accuracy", "placement", "same", "cross")], {"score": mean("score")})


def test_bool_slice_values_stay_apart_from_ints():
    from longctx_eval.scoring.slicing import same_value, value_key

    assert value_key(True) != value_key(1) and value_key(2) == value_key(2.0)
    assert same_value(True, True) and not same_value(1, True) and not same_value(None, "x")
    assert value_key([1]) is None and value_key(float("nan")) is None


def test_scores_file_holds_every_sample(oracle_run):
    _, run_dir, _, _ = oracle_run
    lines = [json.loads(x) for x in (run_dir / "scores" / "probe.jsonl").read_text().splitlines()]
    assert len(lines) == 24
    first = lines[0]
    assert set(first) == {"id", "status", "metadata", "answer", "parsed", "scores"}
    assert first["id"] == "64-0" and first["status"] == "ok" and first["answer"] == "a0" and first["parsed"] == "A0"
    assert first["metadata"] == {"target_tokens": 64, "hops": 2, "placement": "same", "bucket": "near"}
    assert first["scores"] == {
        "score": 1.0,
        "recall@1": 1.0,
        "recall@2": 1.0,
        "recall@3": 1.0,
        "over_length": 0.0,
        "error": 0.0,
    }
    parts = [json.loads(x) for x in (run_dir / "scores" / "probe_parts.jsonl").read_text().splitlines()]
    assert [p["answer"] for p in parts] == [["x0", "y0"], ["x1", "y1"]]
    assert parts[0]["parsed"] == "x0|y0" and parts[0]["scores"]["score"] == 1.0
    assert not list((run_dir / "scores").glob(".*"))  # no temp file left behind


def test_rescoring_rewrites_the_same_breakdowns(oracle_run, tmp_path):
    plugins, run_dir, task, _ = oracle_run
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    (copy / "run.json").unlink()
    (copy / "scores" / "probe.jsonl").unlink()
    assert main(["score", str(copy), "--include-path", str(plugins)]) == 0
    again = next(t for t in json.loads((copy / "run.json").read_text())["tasks"] if t["name"] == "probe")
    for field in ("results", "slices", "curves", "contrasts", "effective_length"):
        assert again[field] == task[field], field
    assert (copy / "scores" / "probe.jsonl").read_text() == (run_dir / "scores" / "probe.jsonl").read_text()


def test_summary_prints_effective_lengths_and_contrasts(oracle_run):
    _, _, task, text = oracle_run
    assert "probe effective length, absolute (score >= 0.856): <64 [" in text
    assert "probe effective length, relative (score >= 0.637 = 85% of 0.75 at 64): 64 [" in text
    assert "probe contrast same_vs_cross (score: placement=same - placement=cross, all lengths): 0.33 [" in text
    assert task["throughput"]["output_tokens_per_s"] is None  # the oracle generates no tokens
