"""Multi-value needle: one key with four values in different quarters of the document; name them all."""

from __future__ import annotations

from data_builders.needle.multivalue import RESERVE, multivalue_cells
from data_builders.needle.plans import per_length_plan
from longctx_eval import Prediction, Sample, Score, Task, Tokenizer, any_of, between, is_empty, mean, rate, task
from longctx_eval.metrics.semantic import semantic_metrics

from ._needle_dataset import cell_samples
from ._needle_scoring import all_spans_oracle, family_requests, several_values, spans_recall

KS = (1, 3, 5, 10)


def multivalue_score(sample: Sample, pred: Prediction) -> Score:
    """Generated text: the share of the values named (partial credit) and all_found; retrieval: the share of
    value needles covered by a top-K chunk."""
    if pred.text is None and pred.status == "ok":
        return Score(spans_recall(pred.hits, sample.gold["spans"], KS))
    values, parsed = several_values(pred.text, sample.gold["answers"], sample.metadata["value_kind"])
    values["empty"] = float(pred.status == "ok" and is_empty(pred.text))
    return Score(values, parsed=parsed)


@task(
    name="needle_multivalue",
    version="2",
    requires=any_of("generate", "retrieve"),
    default_lengths=[1024, 2048, 4096, 8192],
    description="One key, four values spread over the document, all asked; share found or recall@k",
    bounds={"per_length": between(1, 1000), "reserve": between(0, None), "haystacks": between(0, 1000)},
    cache_samples=True,  # requests and scores read each Sample alone
)
def needle_multivalue(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    per_length: int = 6,
    reserve: int = RESERVE,
    source: str = "austen",
    haystacks: int = 0,
) -> Task:
    """`haystacks`: 0 (the default) gives sample i a haystack of its own; h > 0 shares h haystacks round robin."""
    samples = cell_samples(
        "needle_multivalue",
        multivalue_cells,
        per_length_plan("v"),
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
        scorer=multivalue_score,
        metrics=[
            mean("score"),
            mean("all_found"),
            rate("empty"),
            *(mean(f"recall@{k}") for k in KS),
            mean("mrr"),
            *semantic_metrics(),
        ],
        oracle=all_spans_oracle,
        primary={"retrieve": "recall@5"},
        slices=("value_kind", "overlap_bucket"),
        cluster_noun="haystacks",
    )
