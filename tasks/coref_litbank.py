"""Coreference on LitBank (fiction, singletons annotated) stretched with haystack prose to each length."""

from __future__ import annotations

from data_builders.coref.splits import litbank
from longctx_eval import Task, Tokenizer, any_of, between, task

from ._coref import CorefConfig, CorefKit, coref_metrics, corpus_samples


@task(
    name="coref_litbank",
    version="1",
    requires=any_of("coref", "generate"),
    default_lengths=[8192],
    description="LitBank fold-0 test docs in a haystack: CoNLL F1, LEA, BLANC, Span-EM by distance and window",
    bounds={"batch": between(1, 1000)},
)
def coref_litbank(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    split: str = "test",
    fold: int = 0,
    batch: int = 10,
) -> Task:
    kit = CorefKit(CorefConfig(batch=batch), tokenizer)
    return Task(
        dataset=lambda: corpus_samples(kit, litbank(split, fold), lengths, seed),
        prompt=kit.prompt,
        scorer=kit.scorer,
        metrics=coref_metrics(),
        oracle=kit.oracle,
    )
