"""A run file says how many of a task's predictions its run computed, resumed from an earlier run, or served from
an index built elsewhere (`Throughput.computed / resumed / cached`), and the board marks cached throughput: two
real bm25 runs in one process, the second reading the first one's indexes, are not timed alike."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from longctx_eval.cli import main
from longctx_eval.errors import ConfigError
from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.results import read_run
from longctx_eval.run.throughput import measured_throughput

RUN = ["--model", "bm25", "--tasks", "needle", "--lengths", "1024,2048", "--limit", "2", "--seed", "5"]


def _throughput(out: Path):
    (task,) = read_run(out / "bm25" / "run.json").tasks
    return task.n_samples, task.throughput


def test_computed_resumed_and_cached_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_EVAL_INDEX_CACHE", str(tmp_path / "index"))  # a cache nobody filled yet
    assert main(["run", *RUN, "--out", str(tmp_path / "first")]) == 0
    n, t = _throughput(tmp_path / "first")
    assert n == 4 and (t.computed, t.resumed, t.cached) == (4, 0, 0)  # every index built by this run
    time.sleep(1.0)  # the stamps are to the second: a rerun within the second the last one ended reads as computed
    assert main(["run", *RUN, "--out", str(tmp_path / "first")]) == 0  # again: every prediction resumed
    _, again = _throughput(tmp_path / "first")
    assert (again.computed, again.resumed, again.cached) == (0, 4, 0) and again.seconds == t.seconds
    assert main(["run", *RUN, "--out", str(tmp_path / "second")]) == 0  # a new folder, the indexes in memory
    _, cached = _throughput(tmp_path / "second")
    assert (cached.computed, cached.resumed, cached.cached) == (4, 0, 4)
    with pytest.raises(ConfigError, match="cached"):  # a cached run's seconds leave the indexing out
        measured_throughput(tmp_path / "second" / "bm25")
    update_leaderboard([tmp_path / "second"], tmp_path / "board", site=tmp_path / "site")
    board = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    assert "Cached throughput (these predictions read a retriever index built before" in board
    assert "bm25 (4 of 4 predictions)." in board
    model = (tmp_path / "site" / "model-bm25.html").read_text()
    assert "(cached: 4 of 4 predictions read an index built before this run or by another model" in model
