"""Progress display for long work (rich), quiet when not attached to a terminal unless asked."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from longctx_eval.secret_mask import mask_secrets


class MaskingConsole(Console):
    """A rich Console whose text arguments have secrets masked (`secret_mask`) before they are printed."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(mask_secrets(o) if isinstance(o, str) else o for o in objects), **kwargs)


console = MaskingConsole(stderr=True, soft_wrap=True)


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
    with console.status(mask_secrets(message)):
        yield
