"""Values from run folders, task arguments, plugins and paths print as their text on the console (issue 39, cause 1).

Real commands (`run` on the oracle, `score` of its folder) whose values hold rich markup: every line shows the
value as written (tags, `[/]`, a trailing backslash), the line's own markup (`[red]error[/red]`) is applied, not
printed, and nothing raises.
"""

from __future__ import annotations

import json
import textwrap

from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.cli.run import EXIT_TASK_FAILED
from longctx_eval.run_folder.prediction_lines import CHECK_FIELD, record_check

DESCRIPTION = "[bold]hostile[/bold] [/] task"
OWN_MARKUP = ("[red]error", "[red]crashed", "[yellow]", "[bold]oracle", "[/red]:", "[/yellow]")
"""The commands' own tags: applied, so never in the output (a line printed plain after a MarkupError shows them)."""


def _plugin(folder, name: str, raises: str) -> None:
    """A task module whose factory raises `raises`(msg) once it builds samples (tokenizer given)."""
    (folder / f"{name}.py").write_text(
        textwrap.dedent(f'''
        from longctx_eval import Task, any_of, task
        from longctx_eval.errors import ConfigError, TaskUnavailable

        DESCRIPTION = {DESCRIPTION!r}


        @task(name="{name}", version="1", requires=any_of("generate"), default_lengths=[256], description=DESCRIPTION)
        def factory(lengths, seed=0, tokenizer=None, msg=""):
            if tokenizer is not None:
                raise {raises}(msg)
            return Task(dataset=lambda: iter(()), prompt=None, scorer=None, metrics=[])
        ''')
    )


def _own_markup_applied(err: str) -> None:
    leaked = [tag for tag in OWN_MARKUP if tag in err]
    assert not leaked, err


def test_task_errors_crashes_and_skips_with_markup_in_their_messages_print_as_text(tmp_path, capsys):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    _plugin(plugins, "cfg_boom", "ConfigError")
    _plugin(plugins, "crash_boom", "RuntimeError")
    _plugin(plugins, "gone_task", "TaskUnavailable")
    out = tmp_path / "res [bold]"  # a path holding a tag
    args = ["--include-path", str(plugins), "--out", str(out)]
    task_args = [
        "--task-arg=cfg_boom.msg=[red]boom[/red] [/]",
        "--task-arg=crash_boom.msg=[bold]crash[/bold] [/] \\",
        "--task-arg=gone_task.msg=[bold]gone[/bold] [/] \\",
    ]
    code = main(["run", "--model", "oracle", "--tasks", "cfg_boom,crash_boom,gone_task", *task_args, *args])
    err = capsys.readouterr().err
    assert code == 2, err  # a task refused its arguments (ConfigError): bad input, and the run keeps going
    lines = err.splitlines()
    assert "oracle: OracleAdapter, serves attention, coref, generate, loglikelihood, retrieve" in lines, err
    assert "error cfg_boom: [red]boom[/red] [/]" in lines, err
    log = out / "oracle" / "logs" / "crash_boom.log"
    assert f"crashed crash_boom: RuntimeError: [bold]crash[/bold] [/] \\ (traceback in {log})" in lines, err
    assert "skipped gone_task: [bold]gone[/bold] [/] \\" in lines, err  # one trailing backslash, as written
    assert f"wrote {out / 'oracle' / 'run.json'}" in lines, err
    _own_markup_applied(err)

    msg = "--task-arg=cfg_boom.msg=[red]boom[/red] [/] \\"
    assert main(["validate-task", "cfg_boom", msg, "--include-path", str(plugins)]) == 2
    assert capsys.readouterr().err == "error: [red]boom[/red] [/] \\\n"  # `main`'s line: one trailing backslash
    assert main(["tasks", "--include-path", str(plugins)]) == 0
    assert capsys.readouterr().out.count(DESCRIPTION) == 3  # the table's cells are text too


def test_score_of_a_run_folder_whose_names_and_reasons_hold_markup_prints_them_as_text(tmp_path, capsys):
    out = tmp_path / "res [bold]"
    assert main(["run", "--model", "oracle", *tiny_needle("256"), "--limit", "2", "--out", str(out)]) == 0
    run_dir = out / "oracle"
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["skipped"]["[bold]x[/bold]"] = {
        "task": "[bold]x[/bold]",
        "reason": "[red]gone[/red] \\",
        "kind": "missing_data",
    }
    manifest["tasks"]["z[/]"] = {**manifest["tasks"]["needle"], "name": "z[/]"}  # a task no folder defines
    manifest_path.write_text(json.dumps(manifest))
    capsys.readouterr()

    assert main(["score", str(run_dir)]) == 2
    lines = capsys.readouterr().err.splitlines()
    err = "\n".join(lines)
    assert f"wrote {run_dir / 'run.json'}" in lines, err
    assert "  skipped [bold]x[/bold]: [red]gone[/red] \\" in lines, err
    assert "  error z[/]: task 'z[/]' is not discoverable; pass its --include-path" in lines, err
    _own_markup_applied(err)

    # A server's reply stored as every prediction's error: the task failed, its reason printed as written.
    del manifest["tasks"]["z[/]"]
    manifest_path.write_text(json.dumps(manifest))
    preds = run_dir / "predictions.jsonl"
    records = [json.loads(line) for line in preds.read_text().splitlines()]
    for rec in records:
        rec.update(status="error", text=None, hits=[], error="[bold]srv[/bold] said [/] no \\")
        rec[CHECK_FIELD] = record_check(rec)
    preds.write_text("".join(json.dumps(rec) + "\n" for rec in records))

    assert main(["score", str(run_dir)]) == EXIT_TASK_FAILED
    lines = capsys.readouterr().err.splitlines()
    err = "\n".join(lines)
    reason = "[bold]srv[/bold] said [/] no \\"
    assert f"  needle (n=2, over_length=0, failed=2): failed: {reason}; nothing was scored" in err, err
    assert f"needle: failed: {reason}" in lines, err  # the closing line: one trailing backslash, as written
    _own_markup_applied(err)
