"""Throughput as the board shows it, marked where it was not measured in full: predictions served from a cache an
earlier run filled (their seconds leave out building it: 0.5 s against 43.9 s for the same weights) or resumed
from an earlier run (`Throughput.computed / resumed / cached`, `scoring/prediction_origins.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from longctx_eval.leaderboard.page_model import Block, para, text
from longctx_eval.results import TaskResult, Throughput


def cached_note(t: Throughput) -> str:
    """'' when every prediction's time was measured in full, else what was not: 'cached: 20 of 20 predictions read
    an index built before this run or by another model (their seconds leave out building it)'; resumed ones too."""
    total = f" of {t.computed + t.resumed}" if t.computed is not None and t.resumed is not None else ""
    notes = []
    if t.cached:
        notes.append(
            f"cached: {t.cached}{total} predictions read an index built before this run or by another model "
            "(their seconds leave out building it)"
        )
    if t.resumed:
        notes.append(f"{t.resumed}{total} resumed from an earlier run (timed then)")
    return "; ".join(notes)


def throughput_text(t: Throughput) -> str:
    """'0.5 samples/s, 1,200 prompt tokens/s over 40.0 s', with what was cached or resumed in parentheses."""
    shown = f"{t.samples_per_s:.3g} samples/s, {t.prompt_tokens_per_s:,.0f} prompt tokens/s over {t.seconds:.1f} s"
    note = cached_note(t)
    return shown + (f" ({note})" if note else "")


def cached_blocks(results: Sequence[tuple[str, TaskResult]]) -> list[Block]:
    """A task page's line naming each model whose throughput read a cache, so no one compares it as measured."""
    marked = [(name, t.throughput) for name, t in results if t.throughput.cached]
    if not marked:
        return []
    pieces: list = [
        "Cached throughput (these predictions read a retriever index built before this run or by another model, "
        "so their seconds leave out building it; the model page has the figures): "
    ]
    for i, (name, t) in enumerate(marked):
        total = f" of {t.computed + t.resumed}" if t.computed is not None and t.resumed is not None else ""
        pieces += [", "] * bool(i) + [text(name), f" ({t.cached}{total} predictions)"]
    return [para(*pieces, ".", kind="note")]
