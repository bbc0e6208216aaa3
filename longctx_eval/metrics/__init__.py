"""Pure metric functions: answer matching, retrieval, coreference, position probes, aggregation."""

from longctx_eval.metrics.aggregate import Metric, custom, mean, rate, ratio
from longctx_eval.metrics.coref import document_counts, score_clusters
from longctx_eval.metrics.retrieval import first_covering_rank, recall_at
from longctx_eval.metrics.span_em import span_em
from longctx_eval.metrics.text_match import contains_answer, is_empty, normalize

__all__ = [
    "Metric",
    "contains_answer",
    "custom",
    "document_counts",
    "first_covering_rank",
    "is_empty",
    "mean",
    "normalize",
    "rate",
    "ratio",
    "recall_at",
    "score_clusters",
    "span_em",
]
