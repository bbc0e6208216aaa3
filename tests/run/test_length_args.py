"""Per-length task arguments (suite `args_at`): parsed and checked, built per group, recorded, keys kept."""

from __future__ import annotations

import json

import pytest

from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError
from longctx_eval.run.config import TaskPlan
from longctx_eval.run.suite import load_suite

BASE = 'lengths = [448, 512], args = { depths = 2, source = "synthetic" }'


def _suite(tmp_path, body: str, name: str = "mine.toml"):
    path = tmp_path / name
    path.write_text(body)
    return path


def test_args_at_parses_by_length_and_groups_lengths_by_their_arguments(tmp_path):
    path = _suite(tmp_path, f"[oracle]\nneedle = {{ {BASE}, args_at = {{ 512 = {{ depths = 3 }} }} }}\n")
    (plan,) = load_suite(str(path), discover())["oracle"]
    assert plan.args == {"depths": 2, "source": "synthetic"} and plan.length_args == {512: {"depths": 3}}
    assert plan.groups() == [([448], {**plan.args}), ([512], {**plan.args, "depths": 3})]
    short = TaskPlan(plan.info, (448,), None, plan.args, plan.length_args)  # --lengths 448: no override ran
    assert short.applied_length_args == {} and short.groups() == [([448], dict(plan.args))]
    given = TaskPlan(plan.info, plan.lengths, None, **plan.with_args({"depths": 4}))  # --task-arg: every length
    assert given.groups() == [([448, 512], {"depths": 4, "source": "synthetic"})]
    text = "[oracle]\nneedle = { lengths = [1024, 1048576], args_at = { 1M = { depths = 5 } } }\n"
    (plan,) = load_suite(str(_suite(tmp_path, text, "m.toml")), discover())["oracle"]
    assert plan.length_args == {1048576: {"depths": 5}} and plan.groups() == [([1024], {}), ([1048576], {"depths": 5})]


@pytest.mark.parametrize(
    ("args_at", "expect"),
    [
        ("{ 4096 = { depths = 3 } }", "args_at.4096: not one of the task's lengths [448, 512]"),
        ("{ big = { depths = 3 } }", "args_at.big: not one of the task's lengths"),
        ("{ 512 = { dephts = 3 } }", "args_at.512: task 'needle' has no argument 'dephts'. Did you mean 'depths'?"),
        ("{ 512 = { depths = 'x' } }", "args_at.512: needle.depths"),
        ("{ 512 = { depths = 0 } }", "needle.depths=0: expected a value from 1 to 101"),
        ("{ 512 = {} }", "args_at.512 must be a non-empty table of task arguments"),
        ("[512]", "args_at must be a table of lengths"),
    ],
)
def test_a_bad_args_at_is_one_line_naming_the_file_and_field(tmp_path, capsys, args_at, expect):
    path = _suite(tmp_path, f"[oracle]\nneedle = {{ {BASE}, args_at = {args_at} }}\n")
    with pytest.raises(ConfigError) as info:
        load_suite(str(path), discover())
    assert str(path) in str(info.value) and "[oracle] needle" in str(info.value) and expect in str(info.value)
    assert main(["run", "--suite", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert expect in err and len(err.splitlines()) == 1


def test_a_run_with_args_at_records_it_and_keeps_the_keys_of_unchanged_lengths(tmp_path):
    plain = _suite(tmp_path, f"[oracle]\nneedle = {{ {BASE} }}\n", "plain.toml")
    split = _suite(tmp_path, f"[oracle]\nneedle = {{ {BASE}, args_at = {{ 512 = {{ depths = 3 }} }} }}\n")
    assert main(["run", "--suite", str(plain), "--out", str(tmp_path / "a")]) == 0
    assert main(["run", "--suite", str(split), "--out", str(tmp_path / "b")]) == 0
    (task,) = json.loads((tmp_path / "b" / "oracle" / "run.json").read_text())["tasks"]
    assert task["args"] == {"depths": 2, "source": "synthetic"} and task["length_args"] == {"512": {"depths": 3}}
    assert task["n_samples"] == 5 and {c["length"] for c in task["coverage"]} == {448, 512}
    assert sum(c["planned"] for c in task["coverage"] if c["length"] == 512 and c["depth"] is not None) == 3
    (before,) = json.loads((tmp_path / "a" / "oracle" / "run.json").read_text())["tasks"]
    assert before["length_args"] is None and before["config_hash"] != task["config_hash"]

    def keys(out: str) -> dict[int, set[str]]:
        by_length: dict[int, set[str]] = {}
        for line in (tmp_path / out / "oracle" / "predictions.jsonl").read_text().splitlines():
            rec = json.loads(line)
            by_length.setdefault(rec["target_tokens"], set()).add(rec["key"])
        return by_length

    a, b = keys("a"), keys("b")
    assert a[448] == b[448] and len(a[448]) == 2  # the unchanged length: the same samples, the same keys
    assert len(b[512]) == 3 and b[512] != a[512]  # 512 ran with its override


@pytest.mark.parametrize(
    ("task", "args"), [("cross_paragraph", {"per_cell": 1}), ("retrieval", {}), ("needle_lowlex", {"depths": 3})]
)
def test_a_lengths_samples_do_not_depend_on_the_other_lengths_built_with_it(task, args, minilm_tokenizer):
    """Why a group of unchanged lengths keeps its samples (and keys): each length is built as if alone."""
    info = discover().get(task)
    both = list(info.build(args, lengths=[1024, 2048], seed=0, tokenizer=minilm_tokenizer).samples())
    for n in (1024, 2048):
        alone = list(info.build(args, lengths=[n], seed=0, tokenizer=minilm_tokenizer).samples())
        assert alone and alone == [s for s in both if s.metadata["target_tokens"] == n]
