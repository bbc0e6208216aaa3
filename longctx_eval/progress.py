"""Progress display for long work (rich): a live bar on a terminal, plain lines when output goes to a file.

The run's bar (`progress_bar`) shows one row per task; a long step inside a task (embedding a document's
chunks) adds a row under it with `work_progress` (done/total and tokens/s). When stderr is not a terminal,
nothing live is drawn: each task prints one line when it finishes (or stops), and a long step prints a line
every `PRINT_EVERY_S` seconds and when it ends.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from longctx_eval.secret_mask import mask_secrets


class MaskingConsole(Console):
    """A rich Console whose text arguments have secrets masked (`secret_mask`) before they are printed.

    Text is rich markup: a value in it (a name, path or reason from a run file, spec or argument) goes through
    `console_text`. A line whose markup still does not parse (a value someone left unescaped) is printed as
    plain text, tags and all, rather than stopping the command with a MarkupError.
    """

    def print(self, *objects: Any, **kwargs: Any) -> None:
        masked = [mask_secrets(o) if isinstance(o, str) else o for o in objects]
        try:
            super().print(*masked, **kwargs)
        except MarkupError:
            super().print(*masked, **{**kwargs, "markup": False})


console = MaskingConsole(stderr=True, soft_wrap=True, emoji=False)
"""Every line of the suite goes here (stderr). No `:name:` emoji codes: a value's text prints as it is."""


def console_text(value: object) -> str:
    """`value` (a name, path, reason or argument from a run file or spec) as console markup that prints exactly
    its text: `[bold]`, `[/]` and any other tag in it shown, never applied, never a MarkupError. Put it before a
    space, punctuation or the line's end, not right before a tag."""
    # rich's escape doubles a trailing backslash, right only when a tag follows at once; the space added and cut
    # off keeps a trailing backslash one backslash, as it prints before anything but a tag.
    # rich also drops one backslash of every `\[` outside a tag (`\[_x]`, `\[ x]`): one more keeps it.
    return _PLAIN_BRACKET(lambda m: "\\" + m.group(0), escape(f"{value} ")[:-1])


_PLAIN_BRACKET = re.compile(r"\\+\[(?![a-z#/@][^[]*?\])").sub
"""Backslashes before a `[` that opens no rich tag (rich's markup parser removes one of them)."""


PRINT_EVERY_S = 30.0
"""When not on a terminal, a long step prints its progress at most this often (and once when it ends)."""
TASK_LINE_EVERY_S = 120.0
"""When not on a terminal, a task still running prints a progress line at most this often (hours-long runs)."""
_ACTIVE: list[RunProgress] = []


class RunProgress(Progress):
    """The run's progress bar; off a terminal, one line per task when it finishes (or when the bar closes)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reported: set[TaskID] = set()
        self._subtasks: set[TaskID] = set()
        self._lines: dict[TaskID, tuple[float, float, float]] = {}  # per task: last line, first advance, done then

    def __enter__(self) -> RunProgress:
        super().__enter__()
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            for task_id in list(self._tasks):
                self._report(task_id, closing=True)
        finally:
            _ACTIVE.remove(self)
            super().__exit__(*exc)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._report(task_id)

    def subtask(self, description: str, total: int | None) -> TaskID:
        """A row under the tasks for one long step (removed with `remove_task`; never reported as a task)."""
        task_id = self.add_task(description, total=total)
        self._subtasks.add(task_id)
        return task_id

    def _report(self, task_id: TaskID, closing: bool = False) -> None:
        if self.console.is_terminal or task_id in self._reported or task_id in self._subtasks:
            return
        with self._lock:
            task = self._tasks.get(task_id)
        if task is None:
            return
        if not (task.finished or closing):
            self._running_line(task)
            return
        self._reported.add(task_id)
        # A task resumed whole starts complete: rich never marks it finished (nothing advanced), but it is done.
        complete = task.finished or (task.total is not None and task.completed >= task.total)
        state = "done" if complete else "stopped"
        total = int(task.total) if task.total is not None else "?"
        elapsed = task.finished_time if task.finished_time is not None else task.elapsed or 0.0
        self.console.print(f"{task.description}: {int(task.completed)}/{total} {state} in {elapsed:.1f} s")

    def _running_line(self, task: Any) -> None:
        """Off a terminal, every TASK_LINE_EVERY_S: done/total, elapsed and the time left at this run's rate."""
        now = time.monotonic()
        if task.id not in self._lines:
            self._lines[task.id] = (now, now, task.completed)
            return
        last, first, first_done = self._lines[task.id]
        if now - last < TASK_LINE_EVERY_S:
            return
        self._lines[task.id] = (now, first, first_done)
        rate = (task.completed - first_done) / max(now - first, 1e-9)
        left = f", about {duration_text((task.total - task.completed) / rate)} left" if task.total and rate > 0 else ""
        total = int(task.total) if task.total is not None else "?"
        elapsed = duration_text(task.elapsed or 0.0)
        self.console.print(f"{task.description}: {int(task.completed)}/{total}, {elapsed}{left}", highlight=False)


def duration_text(seconds: float) -> str:
    """`seconds` as people read a duration: `42.0 s`, `17.5 min` or `2.1 h` (run progress, dry-run estimates)."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def progress_bar() -> RunProgress:
    """A progress bar with count, elapsed and remaining time, written to stderr."""
    return RunProgress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


@contextmanager
def work_progress(
    description: str, total: int | None, unit: str = "chunks", quiet_if_short: bool = False
) -> Iterator[Callable[[int, int], None]]:
    """Progress of one long step inside a task; yields `advance(n_units, n_tokens)`.

    On a terminal with the run's bar open: a row under it (units done/total, tokens/s), removed at the end.
    Otherwise a line every `PRINT_EVERY_S` seconds and one at the end, e.g.
    `embedding 4096 chunks: 1024/4096 chunks, 5,210 tokens/s, 25 s` (no rate when no tokens are counted, no
    total when it is None; `quiet_if_short`: no end line for a step that never printed one).
    """
    t0 = last = time.perf_counter()
    done = tokens = 0
    bar = _ACTIVE[-1] if _ACTIVE else None
    live = bar is not None and bar.console.is_terminal
    row = bar.subtask(console_text(description), total) if live and bar is not None else None
    out = bar.console if bar is not None else console

    printed = False

    def line() -> str:
        seconds = time.perf_counter() - t0
        count = f"{done:,}" if total is None else f"{done:,}/{total:,}"
        rate = f", {tokens / max(seconds, 1e-9):,.0f} tokens/s" if tokens else ""
        return f"{description}: {count} {unit}{rate}, {seconds:.0f} s"

    def advance(n_units: int, n_tokens: int = 0) -> None:
        nonlocal done, tokens, last, printed
        done += n_units
        tokens += n_tokens
        now = time.perf_counter()
        if row is not None and bar is not None:
            rate = f", {tokens / max(now - t0, 1e-9):,.0f} tokens/s" if tokens else ""
            bar.update(row, completed=done, description=console_text(f"{description}{rate}"))
        elif now - last >= PRINT_EVERY_S:
            last, printed = now, True
            out.print(line(), highlight=False, markup=False)

    try:
        yield advance
    finally:
        if row is not None and bar is not None:
            bar.remove_task(row)
            bar._subtasks.discard(row)
        elif printed or not quiet_if_short:
            out.print(line(), highlight=False, markup=False)


@contextmanager
def status(message: str) -> Iterator[None]:
    """A spinner with a message (plain text, shown as it is) for a single long step."""
    with console.status(console_text(mask_secrets(message))):
        yield
