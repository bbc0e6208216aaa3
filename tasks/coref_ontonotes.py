"""Coreference on OntoNotes 5.0 (the user's own LDC copy, CoNLL-2012 files) stretched with haystack prose."""

from __future__ import annotations

from data_builders.coref.splits import ONTONOTES_HELP, ontonotes, ontonotes_location
from longctx_eval import Task, Tokenizer, any_of, task
from longctx_eval.errors import TaskUnavailable

from ._coref import PROTOCOL_BOUNDS, CorefKit, corpus_samples, protocol


@task(
    name="coref_ontonotes",
    version="2",
    requires=any_of("coref", "loglikelihood", "generate"),
    default_lengths=[4096],
    description="OntoNotes 5.0 test docs (your LDC copy, path=) in a haystack: CoNLL F1, LEA, BLANC, Span-EM",
    bounds=PROTOCOL_BOUNDS,
)
def coref_ontonotes(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    path: str | None = None,
    split: str = "test",
    language: str = "english",
    batch: int = 10,
    mode: str = "choice",
    asked: int = 20,
    candidates: int = 5,
    window: int = 1024,
) -> Task:
    """`path`: the CoNLL-2012 files (folder, file or glob); else $LONGCTX_ONTONOTES; else the task is skipped."""
    where = ontonotes_location(path)
    if where is None:
        raise TaskUnavailable(ONTONOTES_HELP)
    kit = CorefKit(protocol(mode, asked, candidates, batch, window), tokenizer)
    return Task(
        dataset=lambda: corpus_samples(kit, ontonotes(where, split, language), lengths, seed), **kit.task_parts()
    )
