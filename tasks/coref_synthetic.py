"""Coreference on seeded synthetic narratives of any length: person chains (names, descriptions, pronouns)."""

from __future__ import annotations

from longctx_eval import Task, Tokenizer, any_of, between, task

from ._coref import CorefConfig, CorefKit, coref_metrics, synthetic_samples


@task(
    name="coref_synthetic",
    version="1",
    requires=any_of("coref", "generate"),
    default_lengths=[1024, 4096],
    description="Synthetic narratives with exact person chains: CoNLL F1, LEA, Span-EM by distance and window",
    bounds={"per_length": between(1, 1000), "batch": between(1, 1000)},
)
def coref_synthetic(
    lengths: list[int], seed: int = 0, tokenizer: Tokenizer | None = None, per_length: int = 2, batch: int = 20
) -> Task:
    kit = CorefKit(CorefConfig(batch=batch), tokenizer)
    return Task(
        dataset=lambda: synthetic_samples(kit, lengths, seed, per_length),
        prompt=kit.prompt,
        scorer=kit.scorer,
        metrics=coref_metrics(),
        oracle=kit.oracle,
    )
