"""Progress: a line per finished task when stderr is not a terminal, and per-document embedding progress (6.4)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.markup import escape
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval import progress
from longctx_eval.cli import main
from longctx_eval.progress import RunProgress, console_text, work_progress


def _bar(terminal: bool) -> tuple[RunProgress, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=160)
    return RunProgress(console=console, transient=False), out


def test_a_run_logged_to_a_file_prints_a_line_per_finished_task(tmp_path, capsys):
    args = ["run", "--model", "oracle", *tiny_needle("256,512"), "--out", str(tmp_path)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert len(re.findall(r"needle \[oracle\]: 10/10 done in \d+\.\d s", err)) == 1, err


def test_a_task_that_stops_early_says_so_when_the_bar_closes():
    bar, out = _bar(terminal=False)
    with bar:
        job = bar.add_task(escape("needle [m]"), total=10)  # descriptions are markup, escaped as the runner does
        bar.advance(job, 3)
        done = bar.add_task(escape("other [m]"), total=2)
        bar.advance(done, 2)
        assert "other [m]: 2/2 done" in out.getvalue()  # printed when it finished, not at the end
    text = out.getvalue()
    assert "needle [m]: 3/10 stopped" in text and text.count("other [m]: 2/2 done") == 1


def test_a_task_resumed_whole_is_done_not_stopped():
    bar, out = _bar(terminal=False)
    with bar:
        bar.add_task(escape("needle [m]"), total=4, completed=4)  # every prediction already on disk
    assert "needle [m]: 4/4 done" in out.getvalue() and "stopped" not in out.getvalue()


def test_a_long_task_off_a_terminal_prints_running_lines_with_time_left(monkeypatch):
    monkeypatch.setattr(progress, "TASK_LINE_EVERY_S", 0.0)
    bar, out = _bar(terminal=False)
    with bar:
        job = bar.add_task(escape("coref_litbank [m]"), total=40, completed=10)  # 10 resumed from disk
        for _ in range(3):
            bar.advance(job, 5)
    lines = out.getvalue().splitlines()
    running = [x for x in lines if re.fullmatch(r"coref_litbank \[m\]: (20|25)/40, [\d.]+ s, about [\d.]+ s left", x)]
    assert len(running) == 2, lines  # the first advance starts the rate; each later one prints (interval 0)
    assert "coref_litbank [m]: 25/40 stopped" in out.getvalue()
    terminal, shown = _bar(terminal=True)
    with terminal:
        terminal.advance(terminal.add_task("t", total=9), 3)
        terminal.advance(terminal.add_task("u", total=9), 3)
    assert "left" not in shown.getvalue()


def test_durations_read_as_seconds_minutes_or_hours():
    assert [progress.duration_text(s) for s in (42, 1020, 7500)] == ["42.0 s", "17.0 min", "2.1 h"]


def test_long_step_off_a_terminal_prints_lines_with_tokens_per_second(monkeypatch):
    monkeypatch.setattr(progress, "PRINT_EVERY_S", 0.0)
    bar, out = _bar(terminal=False)
    with bar, work_progress("embedding 300 chunks [dense]", 300) as advance:
        for _ in range(3):
            advance(100, 12_800)
    lines = [x for x in out.getvalue().splitlines() if x.startswith("embedding")]
    assert [x.split(",")[0] for x in lines] == [
        "embedding 300 chunks [dense]: 100/300 chunks",
        "embedding 300 chunks [dense]: 200/300 chunks",
        "embedding 300 chunks [dense]: 300/300 chunks",
        "embedding 300 chunks [dense]: 300/300 chunks",  # the closing line
    ]
    assert all(re.search(r", [\d,]+ tokens/s, \d+ s$", x) for x in lines)


def test_long_step_on_a_terminal_is_a_row_under_the_run_bar():
    bar, _ = _bar(terminal=True)
    with bar:
        job = bar.add_task(escape("retrieval [minilm]"), total=1)
        with work_progress("embedding 512 chunks [dense]", 512) as advance:
            advance(256, 40_000)
            rows = {t.description.split(",")[0]: t for t in bar.tasks}
            row = rows[escape("embedding 512 chunks [dense]")]
            assert row.completed == 256 and row.total == 512 and "tokens/s" in row.description
        assert [t.id for t in bar.tasks] == [job]  # the row is gone once the document is embedded


@pytest.fixture(scope="module")
def dense():
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    return load_model(parse_spec("minilm")).indexers[0]


def test_dense_index_of_a_long_document_is_built_in_slices_with_progress(dense, monkeypatch, capsys):
    from longctx_eval.models.retrieval import dense as dense_module

    monkeypatch.setattr(dense_module, "PROGRESS_SLICE", 64)
    n = 2 * max(64, dense.batch_size) + 22  # three slices
    texts = [f"Chunk {i} tells of the harbour town number {i % 17} and its {i % 5} lighthouses." for i in range(n)]
    whole = dense.encode(texts)
    capsys.readouterr()
    built = dense.build(texts)["vectors"]
    assert built.shape == whole.shape and np.allclose(built, whole, atol=1e-5)
    err = capsys.readouterr().err
    assert re.search(rf"embedding {n} chunks \[dense\]: {n}/{n} chunks, [1-9][\d,]* tokens/s", err), err
    assert dense.build(texts[:10])["vectors"].shape == (10, whole.shape[1])  # short documents: one call, silent
    assert "embedding" not in capsys.readouterr().err


# --- values from run files print as text (issue 39, cause 1) --------------------------------------------------

MARKUP = [
    "[bold]",
    "[/]",
    "[/bold]",
    "[red]x[/red]",
    "[link=https://x]y[/link]",
    "\\",
    "\\[b]",
    "\\[_b]",
    "[_b]",
    "[ x]",
    ":warning:",
    "[",
    "]",
]
"""rich markup, escapes and emoji codes a name, path or reason from a run file may hold."""


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(MARKUP) | st.text("ab /:_-é", max_size=3), max_size=6).map("".join))
def test_a_value_in_console_markup_prints_as_its_text(capsys, value):
    """`console_text` keeps any markup in a value from being applied (or raising): the line shows the value."""
    capsys.readouterr()
    progress.console.print(f"[red]skipped[/red] {console_text(value)}: [yellow]end[/yellow]", highlight=False)
    progress.console.print(f"[red]skipped[/red] {console_text(value)}", highlight=False)
    assert capsys.readouterr().err == f"skipped {value}: end\nskipped {value}\n"


def test_markup_left_unescaped_prints_as_text_not_a_markup_error(capsys):
    """A line whose markup does not parse (a value someone forgot to escape) is printed plain, tags and all."""
    progress.console.print("[red]skipped[/red] run [/bold] folder", highlight=False)
    assert capsys.readouterr().err == "[red]skipped[/red] run [/bold] folder\n"


def test_a_status_message_is_plain_text(capsys):
    """`status` shows its message as it is: a spec holding markup neither styles it nor raises."""
    with progress.status("loading hf:org/[/]m[bold]"):
        pass
    progress.console.print(":warning: stays a code", highlight=False)
    assert capsys.readouterr().err.endswith(":warning: stays a code\n")
