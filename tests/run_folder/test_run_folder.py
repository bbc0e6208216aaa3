"""A run folder never loses, overwrites or mislabels a result: accumulation, identity, skips, args, limits, faults."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main

PLUGIN_HEAD = """
from longctx_eval import Request, Sample, Score, Task, TaskUnavailable, any_of, mean, task


def _samples(lengths, ids=None):
    ids = ids or [f"{n}-{i}" for n in lengths for i in range(2)]
    return [
        Sample(id=i, context="alpha beta gamma", question="q?", gold={"answers": ["beta"]},
               metadata={"target_tokens": lengths[0]})
        for i in ids
    ]


def _prompt(s):
    return Request(s.id, s.context + " " + s.question, s.context, s.question, max_new_tokens=4)
"""


def _plugin(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(PLUGIN_HEAD + textwrap.dedent(body))


def _run(out: Path, *args: str) -> int:
    return main(["run", *args, "--out", str(out)])


def _run_file(out: Path, model: str) -> dict:
    return json.loads((out / model / "run.json").read_text())


def _err(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_two_tasks_run_one_at_a_time_both_stay_in_the_run_file_and_leaderboard(tmp_path):
    out = tmp_path / "r"
    assert _run(out, "--model", "oracle", "--tasks", "coref_synthetic", "--lengths", "512", "--limit", "1") == 0
    assert _run(out, "--model", "oracle", *tiny_needle("256"), "--limit", "2") == 0
    run = _run_file(out, "oracle")
    assert [t["name"] for t in run["tasks"]] == ["coref_synthetic", "needle"]
    by_name = {t["name"]: t for t in run["tasks"]}
    assert by_name["needle"]["lengths"] == [256] and by_name["coref_synthetic"]["lengths"] == [512]
    # a rerun of one task replaces only that task
    assert _run(out, "--model", "oracle", *tiny_needle("256"), "--limit", "3") == 0
    again = {t["name"]: t for t in _run_file(out, "oracle")["tasks"]}
    assert again["needle"]["limit"] == 3 and again["needle"]["n_samples"] == 3
    assert again["coref_synthetic"] == by_name["coref_synthetic"]
    assert main(["leaderboard", str(out), "--out", str(tmp_path / "board")]) == 0
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert {t["name"] for e in board["entries"] for t in e["tasks"]} == {"needle", "coref_synthetic"}


def test_limit_is_stratified_over_depths(tmp_path):
    out = tmp_path / "r"
    assert _run(out, "--model", "oracle", *tiny_needle("256,512"), "--limit", "2") == 0
    task = _run_file(out, "oracle")["tasks"][0]
    evaluated = {(c["length"], c["depth"]) for c in task["coverage"] if c["depth"] is not None and c["evaluated"]}
    assert evaluated == {(256, 0.0), (256, 1.0), (512, 0.0), (512, 1.0)}
    not_evaluated = [c for c in task["coverage"] if c["depth"] is not None and not c["evaluated"]]
    assert len(not_evaluated) == 6 and all(c["planned"] == 1 for c in not_evaluated)
    assert _run(tmp_path / "all", "--model", "oracle", *tiny_needle("256"), "--limit", "5") == 0
    task = _run_file(tmp_path / "all", "oracle")["tasks"][0]
    assert {c["depth"] for c in task["coverage"] if c["depth"] is not None and c["evaluated"]} == {
        0.0,
        0.25,
        0.5,
        0.75,
        1.0,
    }


def test_task_args_from_cli_and_suite_are_checked_recorded_and_hashed(tmp_path, capsys):
    out = tmp_path / "r"
    common = ["--model", "oracle", "--tasks", "needle", "--lengths", "512", "--limit", "1"]  # default reserve
    assert _run(out / "a", *common) == 0
    assert _run(out / "b", *common, "--task-arg", "needle.source=synthetic", "--task-arg", "needle.depths=3") == 0
    a, b = _run_file(out / "a", "oracle")["tasks"][0], _run_file(out / "b", "oracle")["tasks"][0]
    assert b["args"] == {"source": "synthetic", "depths": 3} and a["args"] == {}
    assert a["config_hash"] != b["config_hash"] and a["dataset_hash"] != b["dataset_hash"]

    capsys.readouterr()
    assert _run(out / "c", *common, "--task-arg", "needle.sorce=synthetic") == 2
    err = _err(capsys)
    assert "no argument 'sorce'" in err and "Did you mean 'source'?" in err
    assert _run(out / "c", *common, "--task-arg", "needle.depths=many") == 2
    assert "'many' is not a int" in _err(capsys)
    assert _run(out / "c", *common, "--task-arg", "coref_litbank.fold=1") == 2
    assert "does not include" in _err(capsys)
    assert not (out / "c" / "oracle").exists()  # nothing ran

    suite = tmp_path / "s.toml"
    suite.write_text('[oracle]\nneedle = { lengths = [512], limit = 1, args = { source = "synthetic", depths = 3 } }\n')
    assert main(["run", "--suite", str(suite), "--out", str(out / "d")]) == 0
    assert _run_file(out / "d", "oracle")["tasks"][0]["config_hash"] == b["config_hash"]
    suite.write_text("[oracle]\nneedle = { args = { colour = 1 } }\n")
    assert main(["run", "--suite", str(suite), "--out", str(out / "e")]) == 2
    assert "no argument 'colour'" in _err(capsys)


def test_a_task_that_cannot_run_is_skipped_and_the_others_still_run(tmp_path, capsys):
    plugins = tmp_path / "plugins"
    _plugin(
        plugins,
        "needs_data",
        """
        @task(name="needs_data", version="1", requires=any_of("generate"), default_lengths=[64], description="x")
        def needs_data(lengths, seed=0, tokenizer=None, path=None):
            if path is None:
                raise TaskUnavailable("needs a licensed corpus: pass --task-arg needs_data.path=DIR")
            return Task(dataset=_samples(lengths), prompt=_prompt, scorer=lambda s, p: Score({"s": 1.0}),
                        metrics=[mean("s")])
        """,
    )
    out = tmp_path / "r"
    args = [
        "--model",
        "oracle",
        "--tasks",
        "needs_data,needle",
        "--lengths",
        "256",
        "--limit",
        "1",
        "--task-arg",
        "needle.reserve=0",
    ]
    assert _run(out, *args, "--include-path", str(plugins)) == 0
    run = _run_file(out, "oracle")
    assert [t["name"] for t in run["tasks"]] == ["needle"]
    assert run["skipped"][0]["task"] == "needs_data" and run["skipped"][0]["kind"] == "missing_data"
    assert "licensed corpus" in run["skipped"][0]["reason"]
    assert "skipped needs_data: needs a licensed corpus" in _err(capsys)
    assert _run(out, *args, "--include-path", str(plugins), "--strict") == 1
    assert main(["leaderboard", str(out), "--out", str(tmp_path / "board")]) == 0
    assert "licensed corpus" in (tmp_path / "board" / "LEADERBOARD.md").read_text()


def test_scorer_faults_are_one_line_and_named(tmp_path, capsys):
    plugins = tmp_path / "plugins"
    _plugin(
        plugins,
        "no_primary",
        """
        @task(name="no_primary", version="1", requires=any_of("generate"), default_lengths=[64], description="x")
        def no_primary(lengths, seed=0, tokenizer=None):
            return Task(dataset=_samples(lengths), prompt=_prompt, scorer=lambda s, p: Score({"other": 1.0}),
                        metrics=[mean("score"), mean("other")])
        """,
    )
    _plugin(
        plugins,
        "crashes",
        """
        @task(name="crashes", version="1", requires=any_of("generate"), default_lengths=[64], description="x")
        def crashes(lengths, seed=0, tokenizer=None):
            def score(s, p):
                raise KeyError("span")
            return Task(dataset=_samples(lengths), prompt=_prompt, scorer=score, metrics=[mean("score")])
        """,
    )
    _plugin(
        plugins,
        "dupes",
        """
        @task(name="dupes", version="1", requires=any_of("generate"), default_lengths=[64], description="x")
        def dupes(lengths, seed=0, tokenizer=None):
            return Task(dataset=_samples(lengths, ids=["a", "b", "a"]), prompt=_prompt,
                        scorer=lambda s, p: Score({"score": 1.0}), metrics=[mean("score")])
        """,
    )
    inc = ["--include-path", str(plugins)]
    out = tmp_path / "r"
    assert _run(out, "--model", "oracle", "--tasks", "no_primary", *inc) == 0
    assert "never produced the primary metric 'score'" in _err(capsys)
    assert "never produced the primary metric" in _run_file(out, "oracle")["tasks"][0]["warnings"][0]
    assert main(["validate-task", "no_primary", *inc]) == 1
    assert "FAIL scorer produces the primary metric 'score'" in _err(capsys)

    assert _run(out, "--model", "oracle", "--tasks", "crashes", *inc) == 1
    err = _err(capsys)
    assert "crashes: scorer failed on sample '64-0': KeyError: 'span'" in err and "Traceback" not in err
    assert _run_file(out, "oracle")["skipped"][0]["task"] == "crashes"  # no_primary's result is kept too
    assert [t["name"] for t in _run_file(out, "oracle")["tasks"]] == ["no_primary"]

    assert _run(out, "--model", "oracle", "--tasks", "dupes", *inc) == 1
    assert "duplicate sample id 'a'" in _err(capsys)


def test_two_models_never_share_a_run_folder(tmp_path, tiny_llama_dir, capsys):
    first, second = tmp_path / "step1" / "model", tmp_path / "step2" / "model"
    shutil.copytree(tiny_llama_dir, first)
    shutil.copytree(tiny_llama_dir, second)
    import torch
    from transformers import AutoModelForCausalLM

    changed = AutoModelForCausalLM.from_pretrained(second)
    with torch.no_grad():
        changed.lm_head.weight.mul_(0.5)
    changed.save_pretrained(second)

    out = tmp_path / "r"
    common = [*tiny_needle("256"), "--limit", "1"]
    assert _run(out, "--model", f"hf:{first},hf:{second}", *common) == 2
    assert "?name=" in _err(capsys) and not (out / "model").exists()

    assert _run(out, "--model", f"hf:{first}", *common) == 0
    assert _run(out, "--model", f"hf:{second}", *common) == 2
    err = _err(capsys)
    assert "holds results of" in err and "?name=" in err
    assert _run(out, "--model", f"hf:{second}?name=step2", *common) == 0
    assert _run_file(out, "step2")["model"]["name"] == "step2"
    assert _run_file(out, "model")["model"]["spec"] == f"hf:{first}"

    # the same path with other weights (a checkpoint overwritten in place) is refused after loading
    shutil.rmtree(first)
    shutil.copytree(second, first)
    assert _run(out, "--model", f"hf:{first}", *common) == 2
    assert "other weights or settings" in _err(capsys)


def test_over_window_lengths_are_warned_recorded_and_not_scored(tmp_path, tiny_llama_dir, capsys):
    out = tmp_path / "r"
    args = ["--model", f"hf:{tiny_llama_dir}", *tiny_needle("256,1024"), "--limit", "1"]
    assert _run(out, *args) == 0
    err = _err(capsys)
    assert "length(s) 1024 exceed" in err and "?max_length=" in err
    task = _run_file(out, tiny_llama_dir.name)["tasks"][0]
    cov = {c["length"]: c for c in task["coverage"] if c["depth"] is None}
    assert cov[1024]["over_length"] == 1 and cov[1024]["evaluated"] == 0 and cov[256]["evaluated"] == 1
    assert task["pooled_lengths"] == [256]
    pooled = [r for r in task["results"] if r["metric"] == "score" and r["length"] is None]
    assert pooled[0]["n"] == 1  # the over-window sample is not scored as a failure
    assert not [r for r in task["results"] if r["metric"] == "score" and r["length"] == 1024]
    assert "over window" in task["warnings"][0]


def test_bad_specs_are_refused_before_anything_runs_or_moves(tmp_path, capsys):
    out = tmp_path / "r"
    assert _run(out, "--model", "bm25", *tiny_needle("256"), "--limit", "1") == 0
    preds = out / "bm25" / "predictions.jsonl"
    before = preds.read_bytes()
    for bad in ("bm25,bm25?k1=abc", "bm25?k1=-1", "bm25?k1=nan&b=7"):
        assert _run(out, "--model", bad, *tiny_needle("256"), "--no-resume") == 2
        assert "k1" in _err(capsys)
    assert preds.read_bytes() == before and not list(preds.parent.glob("*.bak"))


def test_a_run_folder_in_use_is_refused(tmp_path, capsys):
    run_dir = tmp_path / "r" / "oracle"
    run_dir.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from longctx_eval.run_folder.lock import RunLock\n"
            f"with RunLock(__import__('pathlib').Path({str(run_dir)!r})):\n"
            "    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert _run(tmp_path / "r", "--model", "oracle", *tiny_needle("256")) == 1
        assert f"pid {holder.pid}" in _err(capsys)
    finally:
        holder.kill()
        holder.wait()
    assert _run(tmp_path / "r", "--model", "oracle", *tiny_needle("256"), "--limit", "1") == 0


def test_samples_of_another_run_are_never_scored_under_this_runs_config(tmp_path, capsys):
    """A killed run with other settings rewrote samples/ and its manifest entry: score keeps the earlier result."""
    out = tmp_path / "r"
    assert _run(out, "--model", "bm25", *tiny_needle("256,512")) == 0
    full = _run_file(out, "bm25")["tasks"][0]
    run_dir = out / "bm25"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    entry = manifest["tasks"]["needle"]
    # what a `--limit 1` run killed mid-generation leaves behind: its own samples file, its entry "running"
    samples = (run_dir / "samples" / "needle.jsonl").read_text().splitlines()
    (run_dir / "samples" / "needle.jsonl").write_text(samples[0] + "\n")
    manifest["tasks"]["needle"] = {**entry, "status": "running", "limit": 1, "n_samples": 1}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["score", str(run_dir)]) == 2
    assert "did not finish" in _err(capsys)
    kept = _run_file(out, "bm25")["tasks"][0]
    assert kept == full  # still the full run's result, labelled with the full run's config

    # a finished entry whose samples file was rewritten by another run is refused the same way
    manifest["tasks"]["needle"] = {**entry}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert main(["score", str(run_dir)]) == 2
    assert "does not belong to this folder's needle run" in _err(capsys)


@pytest.mark.parametrize("model", ["oracle"])
def test_old_run_folders_still_score(tmp_path, model):
    """A folder written before per-task manifests (one list of tasks) is converted when read."""
    out = tmp_path / "r"
    assert _run(out, "--model", model, *tiny_needle("256"), "--limit", "2") == 0
    run_dir = out / model
    new = json.loads((run_dir / "manifest.json").read_text())
    entry = new["tasks"]["needle"]
    old = {
        "suite": new["suite"],
        "model": {k: v for k, v in new["model"].items() if k not in ("settings", "identity_sha256")},
        "environment": new["environment"],
        "config": {"tasks": [{"name": "needle", "lengths": [256], "limit": 2}], "seed": 0, "include_paths": []},
        "config_hash": "x",
        "started": new["started"],
        "seconds": 1.0,
        "tasks": [{k: entry[k] for k in ("name", "version", "capability", "dataset_hash", "n_samples", "lengths")}],
        "skipped": [],
    }
    (run_dir / "manifest.json").write_text(json.dumps(old))
    (run_dir / "run.json").unlink()
    assert main(["score", str(run_dir)]) == 0
    assert _run_file(out, model)["tasks"][0]["n_samples"] == 2


def test_a_changed_scorer_is_recorded_and_said_on_rescore(tmp_path, capsys):
    plugins = tmp_path / "plugins"
    body = """
        @task(name="rescored", version="1", requires=any_of("generate"), default_lengths=[64], description="x")
        def rescored(lengths, seed=0, tokenizer=None):
            return Task(dataset=_samples(lengths), prompt=_prompt, scorer=lambda s, p: Score({"score": SCORE}),
                        metrics=[mean("score")])
        """
    _plugin(plugins, "rescored", "SCORE = 1.0\n" + textwrap.dedent(body))
    out = tmp_path / "r"
    assert _run(out, "--model", "oracle", "--tasks", "rescored", "--include-path", str(plugins)) == 0
    first = _run_file(out, "oracle")["tasks"][0]
    _plugin(plugins, "rescored", "SCORE = 0.5\n" + textwrap.dedent(body))
    rescore = subprocess.run(  # a new process, as a user's rescore is: this one has the old module imported
        [sys.executable, "-m", "longctx_eval.cli", "score", str(out / "oracle"), "--include-path", str(plugins)],
        capture_output=True,
        text=True,
    )
    assert rescore.returncode == 0 and "scoring code changed" in " ".join(rescore.stderr.split())
    second = _run_file(out, "oracle")["tasks"][0]
    assert second["scorer_sha256"] != first["scorer_sha256"] and second["version"] == first["version"]
    assert [r["value"] for r in second["results"] if r["metric"] == "score" and r["length"] is None] == [0.5]


def test_a_full_disk_is_one_line_with_exit_2(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "longctx_eval.cli", "run", "--model", "oracle", "--tasks", "needle"]
            + ["--lengths", "1024,2048", "--out", str(disk)],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr and "No space left on device" in proc.stderr
    finally:
        subprocess.run(["umount", str(disk)], check=False)
