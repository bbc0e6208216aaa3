"""Coreference on OntoGUM (OntoNotes scheme, no singletons) stretched with haystack prose to each length."""

from __future__ import annotations

from data_builders.coref.splits import ontogum
from longctx_eval import Task, Tokenizer, any_of, between, task

from ._coref import CorefConfig, CorefKit, coref_metrics, corpus_samples


@task(
    name="coref_ontogum",
    version="1",
    requires=any_of("coref", "generate"),
    default_lengths=[4096],
    description="OntoGUM test docs in a haystack: CoNLL F1, LEA, BLANC, Span-EM by distance and window",
    bounds={"batch": between(1, 1000)},
)
def coref_ontogum(
    lengths: list[int], seed: int = 0, tokenizer: Tokenizer | None = None, split: str = "test", batch: int = 10
) -> Task:
    kit = CorefKit(CorefConfig(batch=batch), tokenizer)
    return Task(
        dataset=lambda: corpus_samples(kit, ontogum(split), lengths, seed),
        prompt=kit.prompt,
        scorer=kit.scorer,
        metrics=coref_metrics(),
        oracle=kit.oracle,
    )
