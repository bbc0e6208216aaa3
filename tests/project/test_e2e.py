"""End to end through the CLI: run, resume, score, leaderboard, on real small data and real models."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "leaderboards" / "schema.json").read_text())


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _results(run_file: Path) -> list[dict]:
    return json.loads(run_file.read_text())["tasks"][0]["results"]


def test_oracle_run_writes_everything_and_scores_100(tmp_path, capsys):
    out, board = tmp_path / "results", tmp_path / "board"
    args = ["run", "--model", "oracle", *tiny_needle("256,512"), "--out", str(out)]
    assert main(args) == 0
    run_dir = out / "oracle"
    preds = _lines(run_dir / "predictions.jsonl")
    assert len(preds) == 10  # 2 lengths x 5 depths
    run = json.loads((run_dir / "run.json").read_text())
    jsonschema.validate(run, SCHEMA)
    pooled = {r["metric"]: r for r in run["tasks"][0]["results"] if r["length"] is None}
    assert pooled["score"]["value"] == 1.0 and pooled["score"]["n"] == 10
    assert pooled["empty_rate"]["value"] == 0.0
    cells = [r for r in run["tasks"][0]["results"] if r["metric"] == "score" and r["depth"] is not None]
    assert {(r["length"], r["depth"]) for r in cells} == {(n, d) for n in (256, 512) for d in (0, 0.25, 0.5, 0.75, 1)}
    assert all("@" not in r["metric"] or r["metric"].startswith("recall@") for r in run["tasks"][0]["results"])

    assert main(["leaderboard", str(out), "--out", str(board)]) == 0
    merged = json.loads((board / "leaderboard.json").read_text())
    assert [e["model"]["name"] for e in merged["entries"]] == ["oracle"]
    assert "oracle" in (board / "LEADERBOARD.md").read_text()
    assert (board / "plots" / "needle.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # a second identical run does no new work
    before = (run_dir / "predictions.jsonl").read_bytes()
    capsys.readouterr()
    assert main(args) == 0
    assert (run_dir / "predictions.jsonl").read_bytes() == before
    assert "10 of 10 predictions already done" in capsys.readouterr().err

    # score recomputes the same metrics from saved predictions alone
    (run_dir / "run.json").unlink()
    assert main(["score", str(run_dir)]) == 0
    assert _results(run_dir / "run.json") == run["tasks"][0]["results"]


@pytest.mark.parametrize("spec", ["bm25", "minilm"])
def test_retrievers_run_needle_and_report_recall(tmp_path, spec):
    out = tmp_path / "r"
    assert main(["run", "--model", spec, "--tasks", "needle", "--lengths", "1024", "--out", str(out)]) == 0
    run = json.loads((out / spec / "run.json").read_text())
    jsonschema.validate(run, SCHEMA)
    task = run["tasks"][0]
    assert task["capability"] == "retrieve"
    pooled = {r["metric"]: r["value"] for r in task["results"] if r["length"] is None}
    assert set(pooled) >= {"recall@1", "recall@3", "recall@5", "mrr", "over_length_rate"}
    assert "score" not in pooled
    # the needle sentence shares its key words with the question: a real retriever finds most needles
    assert pooled["recall@5"] >= 0.6
    preds = _lines(out / spec / "predictions.jsonl")
    assert all(p["hits"] and p["prompt_tokens"] > 0 for p in preds)


def _run_cli(args: list[str], **kw) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "longctx_eval.cli", *args], env=env, **kw)


def test_killed_run_resumes_to_the_same_result(tmp_path, tiny_llama_dir):
    common = ["--model", f"hf:{tiny_llama_dir}", *tiny_needle("256,384")]
    ref = _run_cli(["run", *common, "--out", str(tmp_path / "ref")])
    assert ref.wait(timeout=300) == 0

    out = tmp_path / "killed"
    proc = _run_cli(["run", *common, "--out", str(out)], stderr=subprocess.DEVNULL)
    preds = out / tiny_llama_dir.name / "predictions.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and (not preds.exists() or len(preds.read_text().splitlines()) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(_lines(preds))
    assert 3 <= partial < 10, "the kill must land mid-run"
    assert not (out / tiny_llama_dir.name / "run.json").exists()

    again = _run_cli(["run", *common, "--out", str(out)])
    assert again.wait(timeout=300) == 0
    assert len(_lines(preds)) == 10  # resumed: only the missing samples were generated
    got, want = (
        _results(out / tiny_llama_dir.name / "run.json"),
        _results(tmp_path / "ref" / tiny_llama_dir.name / "run.json"),
    )
    assert got == want
