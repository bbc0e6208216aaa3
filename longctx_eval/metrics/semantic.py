"""The semantic-fidelity metrics a generation task declares in one line: `metrics=[..., *semantic_metrics()]`.

They add BERTScore P, R, F1 (`metrics/bertscore.py`) and embedding similarity (`metrics/embedding_similarity.py`)
of each generated answer against the gold answers as one reference text. The task's scorer does not compute
them: the scoring pass (`scoring/semantic.py`) embeds every answer of the task at once, puts the four fields in
each sample's scores and records the configuration in the run file. A sample with no text answer (a retriever's)
or no reference gets none of them, so they are absent from a retriever's results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from longctx_eval.metrics.aggregate import Metric, column_mean
from longctx_eval.metrics.bertscore import BERTSCORE_FIELDS, DEFAULT_LAYER, DEFAULT_MODEL, BertScoreConfig
from longctx_eval.metrics.embedding_similarity import EMBEDDING_FIELD

SEMANTIC_FIELDS = (*BERTSCORE_FIELDS, EMBEDDING_FIELD)


@dataclass(frozen=True)
class SemanticMetric(Metric):
    """A mean of one semantic field, carrying how the fields are computed (the same for all four)."""

    bertscore: BertScoreConfig = BertScoreConfig()
    embedder: str = DEFAULT_MODEL
    """'minilm' (the packaged all-MiniLM-L6-v2) or a local sentence-transformers folder."""


def semantic_metrics(
    model: str = DEFAULT_MODEL,
    layer: int = DEFAULT_LAYER,
    idf: bool = False,
    baseline: tuple[float, float, float] | None = None,
    embedder: str = DEFAULT_MODEL,
) -> list[Metric]:
    """bertscore_p, bertscore_r, bertscore_f1 and embedding_similarity, each a mean over the answered samples.

    `model`/`layer`: BERTScore's encoder ('minilm' or a local folder) and hidden layer; `idf`: weight tokens by
    their idf over the task's references; `baseline`: (P, R, F1) to rescale with; `embedder`: the sentence
    embedder of the similarity."""
    if isinstance(baseline, list):
        baseline = (*baseline,)  # kept hashable: the configuration identifies the encoder to load
    config = BertScoreConfig(model=model, layer=layer, idf=idf, baseline=baseline)
    return [
        SemanticMetric(name=f, fields=(f,), reduce=column_mean, bertscore=config, embedder=embedder)
        for f in SEMANTIC_FIELDS
    ]


def declared_semantic(metrics: Sequence[Metric]) -> list[SemanticMetric]:
    """The task's semantic metrics (none when it declares none); `scoring/semantic.check_setup` checks that they
    agree on one configuration."""
    return [m for m in metrics if isinstance(m, SemanticMetric)]


def reference_text(gold: Mapping[str, object]) -> str | None:
    """The reference an answer is compared with: the gold answers joined by ', '; None when the gold has none."""
    answers = gold.get("answers")
    if isinstance(answers, str):
        return answers or None
    if isinstance(answers, list | tuple) and answers and all(isinstance(a, str) for a in answers):
        return ", ".join(answers)
    return None


def answer_text(answer: object) -> str:
    """A generated answer as one text: multi-part answers joined by ', ', a missing one empty."""
    if isinstance(answer, list | tuple):
        return ", ".join(a for a in answer if isinstance(a, str) and a.strip())
    return answer if isinstance(answer, str) else ""
