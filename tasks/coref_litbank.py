"""Coreference on LitBank (fiction, singletons annotated) stretched with haystack prose to each length."""

from __future__ import annotations

from data_builders.coref.splits import litbank
from longctx_eval import Task, Tokenizer, any_of, task

from ._coref import PROTOCOL_BOUNDS, CorefKit, corpus_samples, protocol


@task(
    name="coref_litbank",
    version="2",
    requires=any_of("coref", "loglikelihood", "generate"),
    default_lengths=[8192],
    description="LitBank fold-0 test docs in a haystack: CoNLL F1, LEA, BLANC, Span-EM by distance and window",
    bounds=PROTOCOL_BOUNDS,
)
def coref_litbank(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    split: str = "test",
    fold: int = 0,
    batch: int = 10,
    mode: str = "choice",
    asked: int = 20,
    candidates: int = 5,
    window: int = 1024,
) -> Task:
    """`mode`: choice (log-likelihood) or generate; `asked`: mentions asked per document (0: all); docs/coref.md."""
    kit = CorefKit(protocol(mode, asked, candidates, batch, window), tokenizer)
    return Task(dataset=lambda: corpus_samples(kit, litbank(split, fold), lengths, seed), **kit.task_parts())
