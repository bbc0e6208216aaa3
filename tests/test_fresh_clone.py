"""A clone with nothing beside it runs the default suite to a rendered leaderboard (reduced with --limit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _git(*args: str, cwd=REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the repository's git history to clone")
def test_default_suite_from_a_clone_with_nothing_beside_it(tmp_path):
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
    cli = [sys.executable, "-m", "longctx_eval.cli"]
    run = subprocess.run(
        [*cli, "run", "--limit", "1", "--out", "results"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    board = subprocess.run(
        [*cli, "leaderboard", "results", "--out", "board"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert board.returncode == 0, board.stderr[-3000:]
    entries = json.loads((clone / "board" / "leaderboard.json").read_text())["entries"]
    ran = {(e["model"]["name"], t["name"]) for e in entries for t in e["tasks"]}
    for model, task in [
        ("coref-baseline", "coref_litbank"),
        ("coref-baseline", "coref_ontogum"),
        ("coref-baseline", "coref_synthetic"),
        ("smollm2-135m", "needle"),
        ("bm25", "needle"),
        ("tiny-rope", "posprobe"),
    ]:
        assert (model, task) in ran, f"{model} {task} missing from the leaderboard"
    skipped = {(e["model"]["name"], s["task"]): s for e in entries for s in e["skipped"]}
    for (model, task), s in skipped.items():
        assert task == "coref_ontonotes" and "OntoNotes" in s["reason"], (model, task, s)
    assert (clone / "board" / "LEADERBOARD.md").read_text().count("## ") >= 5
