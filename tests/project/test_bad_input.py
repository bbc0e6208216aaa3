"""Bad input gives one clear line naming the thing, exit status 2, and loses nothing already computed."""

from __future__ import annotations

import json
import shutil

import pytest
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError, TaskDefinitionError


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    return err


def test_unknown_task_suggests_the_close_name(tmp_path, capsys):
    assert main(["run", "--model", "oracle", "--tasks", "neadle", "--out", str(tmp_path)]) == 2
    err = _err(capsys)
    assert "unknown task 'neadle'" in err and "Did you mean 'needle'?" in err


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        ("gpt5", "unknown model spec 'gpt5'"),
        ("hf", "lacks a target"),
        ("hf:some/model?dtyp=bfloat16", "unknown option 'dtyp'"),
        ("bm25?k1=high", "k1='high' is invalid"),
        ("retriever:", "lacks a target"),
    ],
)
def test_malformed_spec_is_one_line_listing_adapters(tmp_path, capsys, spec, expect):
    assert main(["run", "--model", spec, *tiny_needle("256"), "--out", str(tmp_path)]) == 2
    err = _err(capsys)
    assert expect in err
    assert len(err.splitlines()) == 1 or "known adapters" not in err
    if "unknown model spec" in expect:
        assert "hf:<folder-or-hub-id>" in err and "bm25" in err and "retriever:" in err


@pytest.mark.parametrize(
    ("source", "expect"),
    [
        ("def broken(:\n", ":1: plugin failed to import: SyntaxError"),
        ("X = 1\n", "defines no @task-decorated factory"),
        (
            "from longctx_eval import task, any_of\n"
            "@task(name='bad', version='1', requires=any_of('generate'), default_lengths=[1], description='d')\n"
            "def bad(seed):\n    pass\n",
            "lacks parameter(s) ['lengths']",
        ),
        (
            "from longctx_eval import task, any_of\n"
            "@task(name='bad', version='1', requires=any_of('telepathy'), default_lengths=[1], description='d')\n"
            "def bad(lengths, seed):\n    pass\n",
            "unknown capability ['telepathy']",
        ),
    ],
)
def test_malformed_plugin_fails_at_discovery_naming_file(tmp_path, capsys, source, expect):
    plugin = tmp_path / "plugins" / "my_task.py"
    plugin.parent.mkdir()
    plugin.write_text(source)
    with pytest.raises(TaskDefinitionError) as info:
        discover([plugin.parent])
    assert str(plugin) in str(info.value) and expect in str(info.value)
    assert main(["tasks", "--include-path", str(plugin.parent)]) == 2
    assert str(plugin) in _err(capsys)


def test_include_path_that_is_not_a_folder(tmp_path):
    with pytest.raises(ConfigError, match="not a folder"):
        discover([tmp_path / "nope"])


def test_unwritable_output_dir(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = blocker / "results"
    assert main(["run", "--model", "oracle", *tiny_needle("256"), "--out", str(out)]) == 2
    assert f"output folder {out} cannot be created" in _err(capsys)


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle")
    assert main(["run", "--model", "oracle", *tiny_needle("256"), "--out", str(out)]) == 0
    return out / "oracle" / "run.json"


def test_corrupt_and_schema_invalid_run_files_are_skipped_not_merged(tmp_path, capsys, oracle_run):
    board = tmp_path / "board"
    assert main(["leaderboard", str(oracle_run), "--out", str(board)]) == 0
    before = (board / "leaderboard.json").read_bytes()

    corrupt = tmp_path / "in" / "corrupt" / "run.json"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_text('{"schema_version": 1, "suite": ')
    invalid = tmp_path / "in" / "invalid" / "run.json"
    invalid.parent.mkdir(parents=True)
    data = json.loads(oracle_run.read_text())
    data["model"]["name"] = "other"
    data["tasks"][0]["n_samples"] = "many"
    invalid.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["leaderboard", str(tmp_path / "in"), "--out", str(board)]) == 2
    err = _err(capsys)
    assert str(corrupt) in err and "not valid JSON" in err
    assert str(invalid) in err and "n_samples" in err
    assert (board / "leaderboard.json").read_bytes() == before  # nothing merged, nothing lost


def test_corrupt_existing_leaderboard_is_never_overwritten(tmp_path, capsys, oracle_run):
    board = tmp_path / "board"
    board.mkdir()
    (board / "leaderboard.json").write_text("{not json")
    assert main(["leaderboard", str(oracle_run), "--out", str(board)]) == 2
    assert "leaderboard.json" in _err(capsys)
    assert (board / "leaderboard.json").read_text() == "{not json"


def test_score_of_an_unfinished_run_names_what_is_missing(tmp_path, capsys, oracle_run):
    run_dir = tmp_path / "copy"
    shutil.copytree(oracle_run.parent, run_dir)
    lines = (run_dir / "predictions.jsonl").read_text().splitlines()
    (run_dir / "predictions.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])  # torn last line
    assert main(["score", str(run_dir)]) == 2
    assert "lacks 1 prediction(s)" in _err(capsys)
    (run_dir / "manifest.json").unlink()
    assert main(["score", str(run_dir)]) == 2
    assert "manifest.json is missing" in _err(capsys)


def test_bad_lengths_and_limit(tmp_path, capsys):
    assert main(["run", "--model", "oracle", "--lengths", "1k,abc", "--out", str(tmp_path)]) == 2
    assert "'abc' is not a positive token count" in _err(capsys)
    assert main(["run", "--model", "oracle", "--limit", "0", "--out", str(tmp_path)]) == 2
    assert "--limit: limit must be a positive" in _err(capsys)
