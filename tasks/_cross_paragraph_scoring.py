"""Prompt, scorer, oracle and metrics of the cross-paragraph task.

Generated text: containment and exact match of the final answer (`longctx_eval.metrics.answer_parsing`),
plus two diagnostics: the reply names an intermediate entity of the chain, or an entity of the distractor
facts, instead of the answer. Retrieval: every fact span covered by one top-k chunk (`all_facts@k`) and the
share covered (`fact_recall@k`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from data_builders.cross_paragraph.grid import (
    MAX_NEW_TOKENS,
    PROMPT_TEMPLATE,
    RECALL_KS,
    RETRIEVAL,
    RETRIEVAL_PRIMARY_K,
)
from longctx_eval import (
    Hit,
    Metric,
    Prediction,
    Request,
    Sample,
    Score,
    contains_answer,
    first_covering_rank,
    is_empty,
    mean,
    normalize,
    rate,
)
from longctx_eval.metrics.answer_parsing import match_answer
from longctx_eval.metrics.semantic import semantic_metrics

RETRIEVAL_PRIMARY = f"all_facts@{RETRIEVAL_PRIMARY_K}"
_CLAUSE_END = re.compile(r"[.!?;,:](?=\s|$)")


def ask(sample: Sample) -> Request:
    """The document first, then the question; the reply continues the sample's answer prefix."""
    return Request(
        sample.id,
        PROMPT_TEMPLATE.format(context=sample.context, question=sample.question),
        sample.context,
        sample.question,
        max_new_tokens=MAX_NEW_TOKENS,
        retrieval=RETRIEVAL,
        answer_prefix=sample.metadata["answer_prefix"],
    )


def first_clause(text: str) -> str:
    """The reply up to its first line break or clause end (". ", ", ", ...): where a short answer stops."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    m = _CLAUSE_END.search(line)
    return line[: m.start()] if m else line


def distance_field(bucket: int) -> str:
    """The score field that carries a sample's headline value under its distance bucket (the distance curve)."""
    return f"recall_d{bucket}"


def facts_found(hits: Sequence[Hit], facts: Sequence[Sequence[int]], ks: Sequence[int]) -> dict[str, float]:
    """Per k: `all_facts@k` (every fact inside one of the top-k chunks) and `fact_recall@k` (the share)."""
    ranks = [first_covering_rank(hits, int(s), int(e)) for s, e in facts]
    out: dict[str, float] = {}
    for k in ks:
        found = [r is not None and r <= k for r in ranks]
        out[f"all_facts@{k}"] = float(all(found))
        out[f"fact_recall@{k}"] = sum(found) / len(found)
    return out


def cross_score(sample: Sample, pred: Prediction) -> Score:
    """Score one prediction (see the module docstring); a failed request scores 0."""
    g = sample.gold
    bucket = distance_field(int(sample.metadata["distance_bucket"]))
    if pred.text is None and pred.status == "ok":
        values = facts_found(pred.hits, g["facts"], RECALL_KS)
        return Score({**values, bucket: values[RETRIEVAL_PRIMARY]})
    text = pred.text or ""
    answer = g["answers"][0]
    m = match_answer(first_clause(text), answer, "name")
    parsed = re.sub(r"^the ", "", m.parsed)
    found = contains_answer(text, answer)

    def names_any(names: Sequence[str]) -> float:
        return float(not found and any(contains_answer(text, n) for n in names))

    values = {
        "score": float(found),
        "exact": float(bool(parsed) and parsed == normalize(answer)),
        "empty": float(pred.status == "ok" and is_empty(text)),
        "intermediate": names_any(g["intermediates"]),
        "distractor": names_any(g["distractor_entities"]),
        bucket: float(found),
    }
    return Score(values, parsed=parsed)


def cross_oracle(sample: Sample) -> Prediction:
    """A perfect answer: the final entity as text; as hits, one span covering every fact, then each fact."""
    facts = sample.gold["facts"]
    whole = Hit(int(facts[0][0]), int(facts[-1][1]), 1.0)
    return Prediction(text=sample.gold["answers"][0], hits=(whole, *(Hit(int(s), int(e), 0.5) for s, e in facts)))


def cross_metrics() -> list[Metric]:
    """Containment first (the primary), exact match, the diagnostics, then the retrieval metrics."""
    return [
        mean("score"),
        mean("exact"),
        rate("empty"),
        rate("intermediate"),
        rate("distractor"),
        *(mean(f"all_facts@{k}") for k in RECALL_KS),
        *(mean(f"fact_recall@{k}") for k in RECALL_KS),
        *semantic_metrics(),
    ]
