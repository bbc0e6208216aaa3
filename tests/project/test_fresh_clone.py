"""A clone with nothing beside it (no ../shared) builds every kind of document and renders a leaderboard.

The default test runs one slice of each data path the default suite reads (prose haystacks, the coreference
corpora shipped in the package, the retrieval bank, the trained position references, the embedded SmolLM2 and
MiniLM); the `slow` one runs the whole default suite (`make eval LIMIT=1`, about 7 minutes on 2 cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SLICE = """\
[bm25]
needle = { lengths = [1024] }
cross_paragraph = { lengths = [2048], limit = 2 }

[minilm]
retrieval = { lengths = [8192] }

["smollm2-135m"]
needle = { lengths = [1024] }

["coref:baseline"]
coref_ontogum = {}
coref_litbank = {}
coref_synthetic = {}
coref_ontonotes = {}

[tiny-rope]
posprobe = { lengths = [128] }
"""
"""One slice per data path of the default suite (longctx_eval/suites/default.toml)."""
SLICE_RAN = [
    ("coref-baseline", "coref_litbank"),
    ("coref-baseline", "coref_ontogum"),
    ("coref-baseline", "coref_synthetic"),
    ("smollm2-135m", "needle"),
    ("bm25", "needle"),
    ("bm25", "cross_paragraph"),
    ("minilm", "retrieval"),
    ("tiny-rope", "posprobe"),
]


def _git(*args: str, cwd=REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _clone_and_run(tmp_path: Path, *run_args: str) -> list[dict]:
    """Clone the repository into an empty folder, run `run --limit 1 *run_args` and the leaderboard there."""
    clone = tmp_path / "empty" / "longctx-eval"
    _git("clone", "--quiet", str(REPO), str(clone), cwd=tmp_path)
    assert sorted(p.name for p in clone.parent.iterdir()) == ["longctx-eval"]  # no shared/ data beside it
    env = {
        **os.environ,
        "PYTHONPATH": str(clone),  # the clone's code, not the checkout the virtualenv was installed from
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    env.pop("LONGCTX_COREF_DATA", None)
    env.pop("LONGCTX_ONTONOTES", None)
    cli = [sys.executable, "-m", "longctx_eval.cli"]
    run = subprocess.run(
        [*cli, "run", "--limit", "1", "--out", "results", *run_args], cwd=clone, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    board = subprocess.run(
        [*cli, "leaderboard", "results", "--out", "board"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert board.returncode == 0, board.stderr[-3000:]
    assert (clone / "board" / "LEADERBOARD.md").read_text().count("## ") >= 5
    return json.loads((clone / "board" / "leaderboard.json").read_text())["entries"]


def _check(entries: list[dict], expected: list[tuple[str, str]]) -> None:
    ran = {(e["model"]["name"], t["name"]) for e in entries for t in e["tasks"]}
    for model, task in expected:
        assert (model, task) in ran, f"{model} {task} missing from the leaderboard"
    skipped = {(e["model"]["name"], s["task"]): s for e in entries for s in e["skipped"]}
    for (model, task), s in skipped.items():
        assert task == "coref_ontonotes" and "OntoNotes" in s["reason"], (model, task, s)


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the repository's git history to clone")
def test_every_data_path_from_a_clone_with_nothing_beside_it(tmp_path):
    suite = tmp_path / "slice.toml"
    suite.write_text(SLICE)
    _check(_clone_and_run(tmp_path, "--suite", str(suite)), SLICE_RAN)


@pytest.mark.slow
@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the repository's git history to clone")
def test_default_suite_from_a_clone_with_nothing_beside_it(tmp_path):
    entries = _clone_and_run(tmp_path)
    _check(entries, [*SLICE_RAN[:4], SLICE_RAN[4], ("tiny-rope", "posprobe")])
