"""Coreference on OntoGUM (OntoNotes scheme, no singletons) stretched with haystack prose to each length."""

from __future__ import annotations

from data_builders.coref.splits import ontogum
from longctx_eval import Task, Tokenizer, any_of, task

from ._coref import PROTOCOL_BOUNDS, CorefKit, corpus_samples, protocol


@task(
    name="coref_ontogum",
    version="2",
    requires=any_of("coref", "loglikelihood", "generate"),
    default_lengths=[4096],
    description="OntoGUM test docs in a haystack: CoNLL F1, LEA, BLANC, Span-EM by distance and window",
    bounds=PROTOCOL_BOUNDS,
)
def coref_ontogum(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    split: str = "test",
    batch: int = 10,
    mode: str = "choice",
    asked: int = 20,
    candidates: int = 5,
    window: int = 1024,
) -> Task:
    """`mode`: choice (log-likelihood) or generate; `asked`: mentions asked per document (0: all); docs/coref.md."""
    kit = CorefKit(protocol(mode, asked, candidates, batch, window), tokenizer)
    return Task(dataset=lambda: corpus_samples(kit, ontogum(split), lengths, seed), **kit.task_parts())
