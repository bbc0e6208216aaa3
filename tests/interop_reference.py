"""Shared by the export tests: our built datasets at 1K and our own `run` of SmolLM2 on them (once a session).

needle: 2 depths (a number and a word value); cross_paragraph: 2-hop chains at one distance (256 tokens), its
cross and same-paragraph pair. The run uses the same task arguments, so its samples are the built rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from longctx_eval.cli import main

LENGTH = 1024
BUILD_ARGS = {
    "needle": ["--depths", "2"],
    "cross_paragraph": ["--option", "hops=2", "--option", "distances=256"],
}
RUN_ARGS = ["--task-arg", "needle.depths=2", "--task-arg", "cross_paragraph.hops=2"]
RUN_ARGS += ["--task-arg", "cross_paragraph.distances=256"]
_ONCE: dict[str, Any] = {}
"""Each test module that imports these fixtures gets its own copy of them: this makes them run once a session."""


def build(task: str, out: Path) -> Path:
    """`longctx-eval build TASK` at LENGTH with BUILD_ARGS into `out`."""
    assert main(["build", task, "--lengths", str(LENGTH), *BUILD_ARGS[task], "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def cross_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built cross_paragraph dataset (its rows carry their contexts; builds in about a second)."""
    if "cross" not in _ONCE:
        _ONCE["cross"] = build("cross_paragraph", tmp_path_factory.mktemp("interop-data") / "cross_paragraph")
    return _ONCE["cross"]


@pytest.fixture(scope="session")
def interop_datasets(cross_dataset: Path) -> dict[str, Path]:
    """task -> the folder `longctx-eval build TASK` wrote (1024 tokens, smollm2-135m)."""
    if "datasets" not in _ONCE:
        needle = build("needle", cross_dataset.parent / "needle")
        _ONCE["datasets"] = {"needle": needle, "cross_paragraph": cross_dataset}
    return _ONCE["datasets"]


@pytest.fixture(scope="session")
def interop_ours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict]]:
    """task -> sample id -> our score record (`scores/TASK.jsonl`: answer, scores) of `run --model hf:smollm2-135m`."""
    if "ours" in _ONCE:
        return _ONCE["ours"]
    out = tmp_path_factory.mktemp("interop-ours")
    tasks = ",".join(BUILD_ARGS)
    argv = ["run", "--model", "hf:smollm2-135m", "--tasks", tasks, "--lengths", str(LENGTH), *RUN_ARGS]
    assert main([*argv, "--out", str(out)]) == 0
    records: dict[str, dict[str, dict]] = {}
    for task in BUILD_ARGS:
        lines = (out / "smollm2-135m" / "scores" / f"{task}.jsonl").read_text().splitlines()
        records[task] = {r["id"]: r for r in map(json.loads, lines)}
    _ONCE["ours"] = records
    return records
