"""Suites: the default suite is well formed, a custom one runs, malformed ones fail with file and key."""

from __future__ import annotations

import json

import pytest

from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.spec import parse_spec
from longctx_eval.run.suite import load_suite


@pytest.mark.parametrize("suite", ["default", "recall-full", "reference"])
def test_shipped_suites_name_known_models_and_tasks(suite):
    plans = load_suite(suite, discover())
    assert {"minilm", "bm25", "smollm2-135m"} <= set(plans)
    for spec, tasks in plans.items():
        parse_spec(spec)
        for plan in tasks:
            assert plan.info.requires.pick(_capabilities(spec)) is not None, (spec, plan.info.name)


def _capabilities(spec: str) -> set[str]:
    """What the spec's kind declares it serves (read without loading the model)."""
    return {str(c) for c in MODEL_KINDS.get(parse_spec(spec).kind).serves}


def test_custom_suite_runs_with_per_task_lengths_and_limits(tmp_path):
    suite = tmp_path / "mine.toml"
    # 448 = a 256-token context + the 192-token prompt reserve (needle v5: a length is the whole prompt budget)
    suite.write_text("[oracle]\nneedle = { lengths = [448, 512], limit = 2 }\n\n[bm25]\nneedle = { lengths = [448] }\n")
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--out", str(out)]) == 0
    oracle = json.loads((out / "oracle" / "run.json").read_text())
    assert oracle["tasks"][0]["n_samples"] == 4
    assert [{k: t[k] for k in ("name", "lengths", "limit", "args")} for t in oracle["config"]["tasks"]] == [
        {"name": "needle", "lengths": [448, 512], "limit": 2, "args": {}}
    ]
    bm25 = json.loads((out / "bm25" / "run.json").read_text())
    assert bm25["tasks"][0]["n_samples"] == 5


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("[oracle]\nneedle = { lenghts = [256] }\n", "unknown key 'lenghts'. Did you mean 'lengths'?"),
        ("[oracle]\nneedle = { lengths = [0] }\n", "lengths must be a non-empty list of positive token counts"),
        ("[oracle]\nneedle = { limit = -1 }\n", "limit must be a positive number"),
        ("[oracle]\nneadle = {}\n", "unknown task 'neadle'"),
        ("[oracle\n", "not valid TOML"),
        ("oracle = 1\n", "must be a table of tasks"),
    ],
)
def test_malformed_suite_names_file_and_key(tmp_path, text, expect):
    suite = tmp_path / "bad.toml"
    suite.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_suite(str(suite), discover())
    assert str(suite) in str(info.value) or "unknown task" in str(info.value)
    assert expect in str(info.value)


def test_suite_and_model_together_is_an_error(tmp_path, capsys):
    assert main(["run", "--suite", "default", "--model", "bm25", "--out", str(tmp_path)]) == 2
    assert "drop --model/--tasks or drop --suite" in capsys.readouterr().err
