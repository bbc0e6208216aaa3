"""A failed request is its own state, like over-window: never scored as a wrong answer, counted and explained.

Scoring (error predictions left out of every task metric, counted in coverage with their reasons), the runner
(a crashed task loses no other task's run file, exit status 4), the leaderboard page ("3 failed", "failed:
reason", run folders it could not read) and a served run whose server is unreachable, then back.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.cli.run import EXIT_TASK_FAILED
from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.metrics.aggregate import mean
from longctx_eval.results import Coverage, read_run, task_failed
from longctx_eval.sample import Prediction, Sample, Score
from longctx_eval.scoring.score import STANDARD_METRICS, coverage, failure_reasons, grouped_results, score_one

FLAKY = textwrap.dedent(
    '''
    """A plugin whose oracle fails on purpose: fail=none|one|all (a request error) or crash (a bug)."""

    from longctx_eval import Prediction, Request, Sample, Score, Task, any_of, mean, task


    @task(name="flaky", version="1", requires=any_of("generate"), default_lengths=[64, 128],
          description="answers 'yes'; its oracle fails as the fail argument says")
    def flaky(lengths, seed=0, tokenizer=None, fail="none"):
        def samples():
            for length in lengths:
                for i in range(2):
                    yield Sample(id=f"{length}-{i}", context=f"context {length} {i}", question="yes?",
                                 gold={"answers": ["yes"]}, metadata={"target_tokens": length})

        def prompt(sample):
            return Request(sample.id, sample.context + " " + sample.question, sample.context, sample.question,
                           max_new_tokens=4)

        def oracle(sample):
            if fail == "crash":
                raise AttributeError("'GPT2Config' object has no attribute 'rope_parameters'")
            if fail == "all" or (fail == "one" and sample.id == "64-0"):
                raise RuntimeError(f"out of memory at {sample.metadata['target_tokens']} tokens")
            return Prediction(text="yes")

        def score(sample, prediction):
            return Score({"score": float(prediction.text == "yes")})

        return Task(dataset=samples, prompt=prompt, scorer=score, metrics=[mean("score")], oracle=oracle)
    '''
)
"""Its oracle stands in for a model: a RuntimeError from serving is a failed request (as an adapter's is)."""


def _sample(i: int, length: int = 64) -> Sample:
    return Sample(f"s{i}", "", "q", "yes", {"target_tokens": length})


def _yes(sample: Sample, pred: Prediction) -> Score:
    return Score({"score": float(pred.text == sample.gold)})


# --- scoring -----------------------------------------------------------------------------------------------


def test_a_failed_request_is_not_a_wrong_answer():
    preds = [
        Prediction(text="yes"),
        Prediction(text="no"),
        Prediction(status="error", error="connection after 6 attempt(s)"),
        Prediction(status="error", error="connection after 6 attempt(s)"),
        Prediction(status="over_length", error="prompt too long"),
    ]
    scored = [(_sample(i), score_one(_yes, _sample(i), p)) for i, p in enumerate(preds)]
    assert scored[2][1].values == {"over_length": 0.0, "error": 1.0}  # the task's scorer never saw it
    rows = {r.metric: r for r in grouped_results(scored, [mean("score"), *STANDARD_METRICS]) if r.length is None}
    assert rows["score"].value == 0.5 and rows["score"].n == 2  # 1 right, 1 wrong; the 2 failures are not 0s
    assert rows["error_rate"].value == 0.5 and rows["error_rate"].n == 4  # over the samples that fit
    assert rows["over_length_rate"].n == 5
    (cell,) = coverage(scored, [(64, None, 6)])
    assert (cell.planned, cell.evaluated, cell.over_length, cell.failed) == (6, 2, 1, 2)
    assert failure_reasons(p for p in preds if p.status == "error") == {"connection after 6 attempt(s)": 2}


def test_every_request_failed_leaves_no_metric_row():
    preds = [Prediction(status="error", error="HTTP 500"), Prediction(status="error", error="timeout after 40 s")]
    scored = [(_sample(i), score_one(_yes, _sample(i), p)) for i, p in enumerate(preds)]
    rows = grouped_results(scored, [mean("score"), *STANDARD_METRICS])
    assert {r.metric for r in rows} == {"error_rate", "over_length_rate"}  # no 0.00 score
    assert failure_reasons(preds) == {"HTTP 500": 1, "timeout after 40 s": 1}


def test_coverage_without_failed_still_validates_and_plans_bound_the_sum():
    old = Coverage.model_validate_json('{"length": 64, "planned": 2, "evaluated": 2, "over_length": 0}', strict=True)
    assert old.failed == 0
    with pytest.raises(ValueError, match="failed"):
        Coverage(length=64, planned=2, evaluated=1, over_length=0, failed=2)


# --- the runner and the leaderboard ------------------------------------------------------------------------


@pytest.fixture
def plugins(tmp_path: Path) -> list[str]:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "flaky.py").write_text(FLAKY)
    return ["--include-path", str(folder)]


def _run(out: Path, plugins: list[str], tasks: str, *args: str, model: str = "oracle") -> int:
    return main(["run", "--model", model, "--tasks", tasks, *plugins, "--out", str(out), *args])


def test_partial_and_total_failures_are_counted_shown_and_exit_non_zero(tmp_path, plugins, capsys):
    out = tmp_path / "results"
    assert _run(out, plugins, "flaky", "--task-arg", "flaky.fail=one") == 0  # 1 of 4 failed: scored over 3
    task = read_run(out / "oracle" / "run.json").tasks[0]
    assert task.errors == 1 and task.failures == {"RuntimeError: out of memory at 64 tokens": 1}
    pooled = next(r for r in task.results if r.metric == "score" and r.length is None)
    assert pooled.value == 1.0 and pooled.n == 3
    assert {(c.length, c.evaluated, c.failed) for c in task.coverage} == {(64, 1, 1), (128, 2, 0)}
    err = capsys.readouterr().err
    assert "1 failed, not scored" in err and "out of memory at 64 tokens" in err

    update_leaderboard([out], tmp_path / "board")
    page = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    assert "1.00 n=1/2, no interval (n < 5) (low n, 1 failed)" in page  # the 64-token cell: one sample, no interval
    assert "RuntimeError: out of memory at 64 tokens (1)" in page

    assert _run(out, plugins, "flaky", "--task-arg", "flaky.fail=all") == 0
    task = read_run(out / "oracle" / "run.json").tasks[0]
    assert not task_failed(task) and task.errors == 1  # resume re-sent only the failed sample; it failed again
    update_leaderboard([out], tmp_path / "board")
    page = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    assert "n=1/2, no interval (n < 5) (low n, 1 failed)" in page  # the 3 earlier successes stand

    assert _run(out, plugins, "flaky", "--task-arg", "flaky.fail=none") == 0  # the failed one re-run, scored
    task = read_run(out / "oracle" / "run.json").tasks[0]
    assert task.errors == 0 and task.failures == {}


def test_a_task_failing_on_every_request_shows_failed_with_its_reason(tmp_path, plugins, capsys):
    out = tmp_path / "results"
    assert _run(out, plugins, "flaky", "--task-arg", "flaky.fail=all") == EXIT_TASK_FAILED
    err = capsys.readouterr().err
    assert "never produced the primary metric" not in err
    assert "flaky: failed: RuntimeError: out of memory at 128 tokens (2)" in " ".join(err.split())
    task = read_run(out / "oracle" / "run.json").tasks[0]
    assert task_failed(task) and task.errors == 4 and task.warnings == []
    assert not [r for r in task.results if r.metric == "score"]
    assert all(c.evaluated == 0 and c.failed == 2 for c in task.coverage)
    assert main(["score", str(out / "oracle"), *plugins]) == EXIT_TASK_FAILED  # rescoring says so too
    assert "flaky: failed: RuntimeError: out of memory" in " ".join(capsys.readouterr().err.split())
    update_leaderboard([out], tmp_path / "board")
    page = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    assert "| **oracle** | failed: RuntimeError: out of memory at 128 tokens (2); " in page
    assert "0.00" not in page.split("## flaky", 1)[1].split("##", 1)[0]


def test_a_crashed_task_costs_only_itself(tmp_path, plugins, capsys):
    out = tmp_path / "results"
    (Path(plugins[1]) / "kv.py").write_text(FLAKY.replace('name="flaky"', 'name="kv"'))
    rc = _run(out, plugins, "kv,flaky", "--task-arg", "flaky.fail=crash")
    err = capsys.readouterr().err
    assert rc == EXIT_TASK_FAILED
    assert err.count("'GPT2Config' object has no attribute 'rope_parameters'") == 2  # when it crashed; the total
    assert "Traceback" not in err and "generation did not finish" not in err
    run = read_run(out / "oracle" / "run.json")
    assert [t.name for t in run.tasks] == ["kv"] and run.tasks[0].errors == 0  # the finished task is kept
    (skip,) = run.skipped
    assert skip.task == "flaky" and skip.kind == "crashed" and "AttributeError" in skip.reason
    log = out / "oracle" / "logs" / "flaky.log"
    assert str(log) in skip.reason and "Traceback (most recent call last)" in log.read_text()

    assert _run(out, plugins, "kv") == 0  # the other task alone: no second error for the crashed one
    assert "generation did not finish" not in capsys.readouterr().err

    assert _run(out, plugins, "flaky") == 0  # fixed: it runs and its crash record is gone
    assert read_run(out / "oracle" / "run.json").skipped == []
    assert _run(out, plugins, "flaky", "--task-arg", "flaky.fail=crash", "--no-resume") == EXIT_TASK_FAILED
    run = read_run(out / "oracle" / "run.json")  # the earlier complete result stays, beside this run's crash
    assert sorted(t.name for t in run.tasks) == ["flaky", "kv"] and [s.kind for s in run.skipped] == ["crashed"]

    update_leaderboard([out], tmp_path / "board")
    page = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    assert "| oracle | flaky | crashed | AttributeError: 'GPT2Config' object" in page


def test_the_leaderboard_names_a_run_folder_it_cannot_read(tmp_path, plugins, capsys):
    out = tmp_path / "results"
    assert _run(out, plugins, "flaky", model="oracle?name=kept") == 0
    assert _run(out, plugins, "flaky", model="oracle?name=unscored") == 0
    (out / "unscored" / "run.json").unlink()  # as if killed after generating, before scoring
    capsys.readouterr()
    assert main(["leaderboard", str(out), "--out", str(tmp_path / "board")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"not read {out / 'unscored'}: run folder without run.json (tasks: flaky (generated))" in err
    assert "1 model(s)" in err
    page = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    assert "## Not read" in page and f"| {out / 'unscored'} | run folder without run.json" in page


# --- a served model whose server is down, then back ---------------------------------------------------------


def test_a_served_run_against_a_closed_port_fails_then_resumes(serve_hf, tmp_path, capsys):
    """The spec's port is a real proxy (tests/servers.py's FaultProxy, no faults scheduled) whose upstream is
    first a closed loopback port (every request: HTTP 502 after the client's retries), then `serve`."""
    from servers import SERVE_MODEL, free_port

    from longctx_eval.serve.fault_proxy import FaultProxy

    port, out = free_port(), tmp_path / "results"
    options = "tokenizer=smollm2-135m&max_length=8192&max_in_flight=1&max_attempts=2&backoff_base=0.05&backoff_cap=0.1"
    spec = f"openai:{SERVE_MODEL}@http://127.0.0.1:{port}/v1?{options}&name=served"
    argv = ["run", "--model", spec, *tiny_needle("256"), "--limit", "2", "--out", str(out)]
    down = FaultProxy(f"http://127.0.0.1:{free_port()}", schedule="seq:ok").start(port=port)
    try:
        assert main(argv) == EXIT_TASK_FAILED
    finally:
        down.close()
    err = " ".join(capsys.readouterr().err.split())
    assert "needle: failed: 5xx after 2 attempt(s)" in err and "never produced the primary metric" not in err
    task = read_run(out / "served" / "run.json").tasks[0]
    assert task_failed(task) and task.errors == 2 and list(task.failures.values()) == [2]
    assert not [r for r in task.results if r.metric == "score"]  # no 0.00 score
    update_leaderboard([out], tmp_path / "board")
    section = (tmp_path / "board" / "LEADERBOARD.md").read_text().split("## needle", 1)[1].split("\n## ", 1)[0]
    assert "| **served** | failed: 5xx after 2 attempt(s)" in section and "0.00" not in section

    up = FaultProxy(serve_hf, schedule="seq:ok").start(port=port)  # the server is back on the same address
    try:
        assert main(argv) == 0
    finally:
        up.close()
    task = read_run(out / "served" / "run.json").tasks[0]
    assert task.errors == 0 and task.failures == {} and task.serving.ok == 2
    assert any(r.metric == "score" and r.length is None and r.n == 2 for r in task.results)
    lines = (out / "served" / "predictions.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["error", "error", "ok", "ok"]  # appended, none lost


def test_a_served_model_whose_port_is_closed_at_load_is_named_on_the_page(tmp_path, capsys):
    """A real closed loopback port from the start: the model cannot load, so nothing runs; the console says why,
    exit status 1, logs/load.log keeps the reason, and the leaderboard lists the folder under Not read."""
    from servers import free_port

    out = tmp_path / "results"
    spec = f"openai:smollm2-135m@http://127.0.0.1:{free_port()}/v1?tokenizer=smollm2-135m&max_length=4096&name=down"
    argv = ["run", "--model", spec, *tiny_needle("256"), "--limit", "1", "--out", str(out)]
    assert main(argv) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "cannot reach http://127.0.0.1:" in err
    log = (out / "down" / "logs" / "load.log").read_text()
    assert "model down could not load" in log and "cannot reach" in log
    assert not (out / "down" / "run.json").exists()
    assert main(["leaderboard", str(out), "--out", str(tmp_path / "board")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"not read {out / 'down'}: the model could not load, nothing ran: " in err
    page = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    assert f"| {out / 'down'} | the model could not load, nothing ran: " in page and "cannot reach" in page
