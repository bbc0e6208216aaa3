"""`run --shard I/N` and `merge`: shards keep whole haystacks and documents, and their merge is the unsharded run,
sample for sample and number for number (real bm25 runs of needle, cross_paragraph and retrieval)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from longctx_eval.errors import ConfigError
from longctx_eval.run_folder.shard import Shard

TASKS = "needle,cross_paragraph,retrieval"
ARGS = ["--task-arg", "needle.per_cell=3", "--task-arg", "retrieval.docs_per_length=3"]
TIMING = {"seconds", "started", "throughput"}
"""What differs between any two runs (wall time); everything else of run.json must be equal."""


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "longctx_eval.cli", *args], capture_output=True, text=True, timeout=600
    )


def _run(out: Path, *extra: str) -> None:
    done = _cli(
        "run",
        "--model",
        "bm25",
        "--tasks",
        TASKS,
        "--lengths",
        "1024,2048",
        "--limit",
        "8",
        *ARGS,
        "--out",
        str(out),
        *extra,
    )
    assert done.returncode == 0, done.stderr


def _results(run_dir: Path) -> dict:
    """run.json without wall-time fields."""

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in TIMING}
        return [strip(v) for v in x] if isinstance(x, list) else x

    return strip(json.loads((run_dir / "run.json").read_text()))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One unsharded run, and the same run as 2 and as 3 shards (each set in its own folder)."""
    root = tmp_path_factory.mktemp("shards")
    _run(root / "whole")
    for n in (2, 3):
        for i in range(1, n + 1):
            _run(root / f"n{n}", "--shard", f"{i}/{n}")
    return root


@pytest.mark.parametrize("n", [2, 3])
def test_merged_shards_are_the_unsharded_run(runs, n):
    shards = sorted((runs / f"n{n}").glob("bm25.shard-*"))
    assert [p.name for p in shards] == [f"bm25.shard-{i}-of-{n}" for i in range(1, n + 1)]
    done = _cli("merge", *map(str, shards))
    assert done.returncode == 0, done.stderr
    merged, whole = runs / f"n{n}" / "bm25", runs / "whole" / "bm25"
    for task in TASKS.split(","):
        assert (merged / "samples" / f"{task}.jsonl").read_bytes() == (whole / "samples" / f"{task}.jsonl").read_bytes()
    assert _results(merged) == _results(whole)  # every metric, interval, n and effective length
    tasks = {t["name"]: t for t in json.loads((merged / "run.json").read_text())["tasks"]}
    assert {name: t["n_samples"] for name, t in tasks.items()} == {"needle": 16, "cross_paragraph": 14, "retrieval": 16}
    manifest = json.loads((merged / "manifest.json").read_text())
    assert manifest["merged_from"] == [str(p) for p in shards]


def test_a_shard_keeps_each_haystack_and_document_whole(runs):
    """Every sample of a haystack (needle, cross_paragraph) or a document (retrieval) is in one shard only."""
    owner: dict[tuple[str, str], str] = {}
    for shard in sorted((runs / "n3").glob("bm25.shard-*")):
        for task in TASKS.split(","):
            for line in (shard / "samples" / f"{task}.jsonl").read_text().splitlines():
                cluster = json.loads(line)["metadata"]["cluster"]
                assert owner.setdefault((task, cluster), shard.name) == shard.name, (task, cluster)
    assert len({c for t, c in owner if t == "needle"}) == 4  # 2 lengths x the 2 haystacks 8 of 15 samples reach


def test_shards_that_are_not_one_run_are_refused(runs, tmp_path):
    shards = sorted((runs / "n3").glob("bm25.shard-*"))
    missing = _cli("merge", str(shards[0]), str(shards[1]), "--out", str(tmp_path / "a"))
    assert missing.returncode == 2 and "shard 3/3 missing" in missing.stderr
    twice = _cli("merge", str(shards[0]), str(shards[0]), str(shards[1]), "--out", str(tmp_path / "b"))
    assert twice.returncode == 2 and "given twice" in twice.stderr
    other = tmp_path / "seed1"
    _run(other, "--seed", "1", "--shard", "3/3")
    mixed = _cli(
        "merge", str(shards[0]), str(shards[1]), str(other / "bm25.shard-3-of-3"), "--out", str(tmp_path / "c")
    )
    assert mixed.returncode == 2 and "ran with another seed (1" in mixed.stderr, mixed.stderr
    unsharded = _cli("merge", str(runs / "whole" / "bm25"), "--out", str(tmp_path / "d"))
    assert unsharded.returncode == 2 and "was not run as a shard" in unsharded.stderr
    for result in (missing, twice, mixed, unsharded):
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not any((tmp_path / x).exists() for x in "abcd")


def test_a_torn_prediction_line_in_a_shard_is_refused_not_dropped(runs, tmp_path):
    copies = []
    for shard in sorted((runs / "n2").glob("bm25.shard-*")):
        copies.append(tmp_path / shard.name)
        shutil.copytree(shard, copies[-1])
    with (copies[1] / "predictions.jsonl").open("ab") as f:
        f.write(b'{"key": "torn')
    done = _cli("merge", *map(str, copies), "--out", str(tmp_path / "m"))
    assert done.returncode == 2 and "an unusable prediction line; run that shard again" in done.stderr


def test_shard_assignment_deals_clusters_round_robin():
    clusters = ["a", "a", "b", "c", "b", "d", "e"]
    assert [Shard(1, 2).positions(clusters), Shard(2, 2).positions(clusters)] == [[0, 1, 3, 6], [2, 4, 5]]
    assert sorted(
        Shard(1, 3).positions(clusters) + Shard(2, 3).positions(clusters) + Shard(3, 3).positions(clusters)
    ) == list(range(7))
    for bad in ("0/2", "3/2", "2", "a/b", "1/0", "1/99999"):
        with pytest.raises(ConfigError, match="expected I/N"):
            Shard.parse(bad)


def test_the_leaderboard_lists_shards_and_ranks_only_the_merged_run(runs, tmp_path):
    """Each shard's run.json says it is a part; the board lists it under Not read (exit 0) and shows the merge."""
    shards = sorted((runs / "n2").glob("bm25.shard-*"))
    merged = _cli("merge", *map(str, shards), "--out", str(tmp_path / "bm25"))
    assert merged.returncode == 0, merged.stderr
    for shard in shards:
        assert {t["shard"] for t in json.loads((shard / "run.json").read_text())["tasks"]} == {
            f"{shards.index(shard) + 1}/2"
        }
    board = _cli("leaderboard", *map(str, shards), str(tmp_path / "bm25"), "--out", str(tmp_path / "lb"))
    assert board.returncode == 0, board.stderr
    for i, shard in enumerate(shards, 1):
        assert f"not read {shard}/run.json: shard {i}/2 of a run: a part, not ranked" in board.stderr
    entries = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())["entries"]
    assert [{t["name"]: t["n_samples"] for t in e["tasks"]} for e in entries] == [
        {"needle": 16, "cross_paragraph": 14, "retrieval": 16}
    ]
