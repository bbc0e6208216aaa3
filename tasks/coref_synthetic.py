"""Coreference on seeded synthetic narratives of any length: person chains (names, descriptions, pronouns)."""

from __future__ import annotations

from longctx_eval import Task, Tokenizer, any_of, between, task

from ._coref import PROTOCOL_BOUNDS, CorefKit, protocol, synthetic_samples


@task(
    name="coref_synthetic",
    version="2",
    requires=any_of("coref", "loglikelihood", "generate"),
    default_lengths=[1024, 4096],
    description="Synthetic narratives with exact person chains: CoNLL F1, LEA, Span-EM by distance and window",
    bounds={"per_length": between(1, 1000), **PROTOCOL_BOUNDS},
)
def coref_synthetic(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    per_length: int = 2,
    batch: int = 20,
    mode: str = "choice",
    asked: int = 20,
    candidates: int = 5,
    window: int = 1024,
) -> Task:
    """`mode`: choice (log-likelihood) or generate; `asked`: mentions asked per document (0: all); docs/coref.md."""
    kit = CorefKit(protocol(mode, asked, candidates, batch, window), tokenizer)
    return Task(dataset=lambda: synthetic_samples(kit, lengths, seed, per_length), **kit.task_parts())
