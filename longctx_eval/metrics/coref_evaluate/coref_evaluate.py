"""Coreference metrics as a Hugging Face `evaluate` module: `evaluate.load("<path>/coref_evaluate")`.

Each example is one document; `predictions` and `references` are its clusters, a cluster a list of
[start, end] inclusive token spans. Scores agree with the CoNLL-2012 scorer v8.01 and LEA: numerators and
denominators are summed over documents (BLANC never links across documents). Returns, for each of muc,
bcub, ceafm, ceafe, blanc, lea, mentions and conll, `<metric>_recall`, `<metric>_precision`, `<metric>_f1`.
"""

from __future__ import annotations

import datasets
import evaluate

from longctx_eval.metrics.coref import score_clusters

_CLUSTERS = datasets.Sequence(datasets.Sequence(datasets.Sequence(datasets.Value("int64"))))


class CorefEvaluate(evaluate.Metric):
    """CoNLL-2012 coreference metrics (MUC, B-cubed, CEAF-m/e, BLANC, LEA, mentions, CoNLL F1)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=__doc__,
            citation="Pradhan et al. 2014, Scoring Coreference Partitions of Predicted Mentions; Moosavi & Strube 2016",
            inputs_description="predictions, references: per document, a list of clusters of [start, end] spans",
            features=datasets.Features({"predictions": _CLUSTERS, "references": _CLUSTERS}),
        )

    def _compute(self, predictions: list, references: list) -> dict[str, float]:
        key = [[(str(i), s, e) for s, e in c] for i, doc in enumerate(references) for c in doc]
        response = [[(str(i), s, e) for s, e in c] for i, doc in enumerate(predictions) for c in doc]
        scores = score_clusters(key, response, documents=[str(i) for i in range(len(references))])
        return {
            f"{m}_{part}": v
            for m, t in scores.items()
            for part, v in zip(("recall", "precision", "f1"), t, strict=True)
        }
