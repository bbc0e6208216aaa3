"""Prompts and scorers shared by the needle family (needle, needle_multikey, needle_lowlex, ...).

Generated text is read with `longctx_eval.metrics.answer_parsing` (containment, exact match of the parsed
answer, partial credit); retrieval hits are scored through the needle spans (`recall_at`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from data_builders.needle.grid import PROMPT_TEMPLATE, RETRIEVAL
from longctx_eval import Hit, Metric, Prediction, Request, Sample, Score, first_covering_rank, mean, rate, recall_at
from longctx_eval.metrics.answer_parsing import found_values, match_answer, parse_all
from longctx_eval.metrics.semantic import semantic_metrics

SINGLE_KS = (1, 3, 5)
"""Recall@K of the single-target variants: the K the needle task has always reported."""


def ask(sample_id: str, context: str, question: str, answer_prefix: str, max_new_tokens: int) -> Request:
    """The document first, then the question; the reply continues `answer_prefix`; retrievers get the question."""
    prompt = PROMPT_TEMPLATE.format(context=context, question=question)
    return Request(
        sample_id,
        prompt,
        context,
        question,
        max_new_tokens=max_new_tokens,
        retrieval=RETRIEVAL,
        answer_prefix=answer_prefix,
    )


def single_request(sample: Sample) -> Request:
    """The request of a one-question sample (gold holds its answer prefix and budget)."""
    g = sample.gold
    return ask(sample.id, sample.context, sample.question, g["answer_prefix"], g["max_new_tokens"])


def single_score(sample: Sample, pred: Prediction, ks: Sequence[int] = SINGLE_KS) -> Score:
    """Generated text: containment, exact match and emptiness of the one gold value; retrieval: its span at K."""
    if pred.text is None and pred.status == "ok":
        start, end = sample.gold["span"]
        return Score(recall_at(pred.hits, start, end, ks))
    m = match_answer(pred.text, sample.gold["answers"][0], sample.metadata["value_kind"])
    values = {"score": float(m.contains), "exact": float(m.exact), "empty": float(pred.status == "ok" and m.empty)}
    return Score(values, parsed=m.parsed)


def single_metrics(ks: Sequence[int] = SINGLE_KS) -> list[Metric]:
    """score (containment) first, then exact match, empty answers, recall@K and MRR for retrievers, then the
    semantic fidelity of generated answers (BERTScore, embedding similarity)."""
    metrics = [mean("score"), mean("exact"), rate("empty"), *(mean(f"recall@{k}") for k in ks), mean("mrr")]
    return [*metrics, *semantic_metrics()]


def spans_recall(hits: Sequence[Hit], spans: Sequence[Sequence[int]], ks: Sequence[int]) -> dict[str, float]:
    """The share of `spans` covered whole by one of the top-K hits, per K, and their mean reciprocal rank."""
    ranks = [first_covering_rank(hits, int(s), int(e)) for s, e in spans]
    out = {f"recall@{k}": sum(r is not None and r <= k for r in ranks) / len(ranks) for k in ks}
    out["mrr"] = sum(1.0 / r for r in ranks if r is not None) / len(ranks)
    return out


def several_values(text: str | None, golds: Sequence[str], kind: str) -> tuple[dict[str, float], str]:
    """Partial credit for a reply that should name every gold value: (score fields, parsed values)."""
    reply = text or ""
    found = found_values(reply, golds)
    share = sum(found) / len(found)
    return {"score": share, "all_found": float(all(found))}, "; ".join(parse_all(reply, kind))


def part_answers(sample: Sample) -> Sequence[Mapping[str, Any]]:
    """The per-request gold of a multi-question sample: question, answer prefix, budget, answer, span."""
    return sample.gold["parts"]


def family_requests(sample: Sample) -> Request | list[Request]:
    """One request per question of a needle-family sample, all on the same context (so its prefix is shared)."""
    reqs = [
        ask(sample.id, sample.context, p["question"], p["answer_prefix"], p["max_new_tokens"])
        for p in part_answers(sample)
    ]
    return reqs[0] if len(reqs) == 1 else reqs


def all_spans_oracle(sample: Sample) -> Prediction:
    """A perfect answer to a one-question sample with several values: all of them, every needle as a hit."""
    hits = tuple(Hit(int(s), int(e), 1.0) for s, e in sample.gold["spans"])
    return Prediction(text=", ".join(sample.gold["answers"]), hits=hits)


def per_part_oracle(sample: Sample) -> Prediction:
    """A perfect answer to a several-question sample: each part's value, its needle as the top hit."""
    parts = tuple(
        Prediction(text=p["answers"][0], hits=tuple(Hit(int(s), int(e), 1.0) for s, e in p["spans"]))
        for p in part_answers(sample)
    )
    return Prediction(parts=parts)
