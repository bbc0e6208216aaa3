"""Multi-query needle: four needles with different keys in one document, each asked as its own request."""

from __future__ import annotations

from data_builders.haystack.prompt_budget import PROMPT_RESERVE
from data_builders.needle.multiquery import multiquery_cells
from data_builders.needle.plans import per_length_plan
from longctx_eval import Prediction, Sample, Score, Task, Tokenizer, any_of, between, mean, recall_at, task
from longctx_eval.metrics.answer_parsing import match_answer
from longctx_eval.metrics.semantic import semantic_metrics

from ._needle_dataset import cell_samples
from ._needle_scoring import SINGLE_KS, family_requests, part_answers, per_part_oracle


def multiquery_score(sample: Sample, pred: Prediction) -> Score:
    """The share of the questions answered (containment of each part's value), all_found, exact and empty
    shares; retrieval: recall@K and MRR of each part's needle, averaged over the parts."""
    gold = part_answers(sample)
    parts = pred.parts or tuple(Prediction(status=pred.status) for _ in gold)  # a failed sample: every part
    if len(parts) != len(gold):
        raise ValueError(f"expected {len(gold)} answer parts, got {len(parts)}")
    if all(p.text is None and p.status == "ok" for p in parts):
        per = [
            recall_at(p.hits, g["spans"][0][0], g["spans"][0][1], SINGLE_KS) for p, g in zip(parts, gold, strict=True)
        ]
        return Score({k: sum(r[k] for r in per) / len(per) for k in per[0]})
    kind = sample.metadata["value_kind"]
    matches = [match_answer(p.text, g["answers"][0], kind) for p, g in zip(parts, gold, strict=True)]
    empty = [p.status == "ok" and m.empty for p, m in zip(parts, matches, strict=True)]
    n = len(matches)
    values = {
        "score": sum(m.contains for m in matches) / n,
        "all_found": float(all(m.contains for m in matches)),
        "exact": sum(m.exact for m in matches) / n,
        "empty": sum(empty) / n,
    }
    return Score(values, parsed=" | ".join(m.parsed for m in matches))


@task(
    name="needle_multiquery",
    version="2",
    requires=any_of("generate", "retrieve"),
    default_lengths=[1024, 2048, 4096, 8192],
    description="Four needles with different keys, each asked separately on one document; share answered",
    bounds={"per_length": between(1, 1000), "reserve": between(0, None), "haystacks": between(0, 1000)},
    cache_samples=True,  # requests and scores read each Sample alone
)
def needle_multiquery(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    per_length: int = 6,
    reserve: int = PROMPT_RESERVE,
    source: str = "austen",
    haystacks: int = 0,
) -> Task:
    """`haystacks`: 0 (the default) gives sample i a haystack of its own; h > 0 shares h haystacks round robin."""
    samples = cell_samples(
        "needle_multiquery",
        multiquery_cells,
        per_length_plan("q"),
        tokenizer,
        source,
        lengths,
        per_length,
        seed,
        reserve,
        haystacks,
    )
    return Task(
        dataset=samples,
        prompt=family_requests,
        scorer=multiquery_score,
        metrics=[
            mean("score"),
            mean("all_found"),
            mean("exact"),
            mean("empty", name="empty_rate"),
            *(mean(f"recall@{k}") for k in SINGLE_KS),
            mean("mrr"),
            *semantic_metrics(),
        ],
        oracle=per_part_oracle,
        primary={"retrieve": "recall@1"},
        slices=("value_kind", "overlap_bucket"),
        cluster_noun="haystacks",
    )
