"""Progress display for long work (rich), quiet when not attached to a terminal unless asked."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True, soft_wrap=True)


def progress_bar() -> Progress:
    """A progress bar with count, elapsed and remaining time, written to stderr."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


@contextmanager
def status(message: str) -> Iterator[None]:
    """A spinner with a message for a single long step."""
    with console.status(message):
        yield
