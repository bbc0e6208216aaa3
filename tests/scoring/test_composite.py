"""The composite serving score: its documented normalisation, weights, and semantic fidelity with the real MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

import longctx_eval.scoring.composite as composite_module
from longctx_eval.errors import ConfigError
from longctx_eval.leaderboard.serving import composite_rows, failed_note
from longctx_eval.results import CompositeScore, MetricResult, TaskResult
from longctx_eval.sample import Sample
from longctx_eval.scoring.composite import (
    DEFAULT_WEIGHTS,
    CompositeConfig,
    answer_text,
    composite_score,
    latency_score,
    minilm,
    parse_weights,
    reference_text,
    semantic_fidelity,
    task_composite,
    throughput_score,
    with_composite,
)
from longctx_eval.scoring.labels import composite_sentence


def test_normalisation_is_the_documented_one():
    assert throughput_score(0) == 0.0
    assert throughput_score(498) == pytest.approx(0.498)
    assert throughput_score(1842) == 1.0  # clipped
    assert latency_score(0.0) == 1.0
    assert latency_score(0.050) == pytest.approx(0.75)
    assert latency_score(0.200) == 0.0
    assert latency_score(3.0) == 0.0  # clipped, never negative


def test_weights_parse_check_and_divide_by_their_sum():
    assert parse_weights("0.3,0.25,0.25,0.2") == DEFAULT_WEIGHTS
    for bad in ("0.3,0.25,0.25", "a,b,c,d", "0,0,0,0", "-1,1,1,1", "nan,1,1,1"):
        with pytest.raises(ConfigError, match="throughput,latency,recall,fidelity"):
            parse_weights(bad)
    with pytest.raises(ConfigError, match="--composite-latency"):
        CompositeConfig(latency="itl")
    inputs = dict(
        output_tokens_per_s=500.0, latency_p95_s=0.1, recall=0.8, recall_metric="score", fidelity=0.6, fidelity_n=4
    )
    s = composite_score(**inputs)
    assert (s.throughput, s.latency, s.recall, s.fidelity) == pytest.approx((0.5, 0.5, 0.8, 0.6))
    assert s.value == pytest.approx(0.3 * 0.5 + 0.25 * 0.5 + 0.25 * 0.8 + 0.2 * 0.6)
    doubled = composite_score(**inputs, config=CompositeConfig(weights=parse_weights("0.6,0.5,0.5,0.4")))
    assert doubled.value == pytest.approx(s.value)  # divided by the sum
    only_recall = composite_score(**inputs, config=CompositeConfig(weights=parse_weights("0,0,1,0")))
    assert only_recall.value == pytest.approx(0.8)
    assert s.output_tokens_per_s == 500.0 and s.latency_p95_s == 0.1 and s.latency_metric == "ttft"


def test_reference_and_answer_texts():
    assert reference_text({"answers": ["6084690"]}) == "6084690"
    assert reference_text({"answers": ["a", "b"]}) == "a, b"
    assert reference_text({"spans": [[0, 3]]}) is None
    assert answer_text([" 12", None, "34"]) == " 12, 34"
    assert answer_text(None) == ""


@pytest.fixture(scope="module")
def embed():
    return minilm()


def test_fidelity_with_minilm(embed):
    same = semantic_fidelity(["The capital of France is Paris."], ["The capital of France is Paris."], embed)
    assert same == pytest.approx(1.0, abs=1e-5)
    close = semantic_fidelity(["Paris is the capital of France."], ["The capital of France is Paris."], embed)
    far = semantic_fidelity(["Whales breach before the boats are lowered."], ["The capital of France is Paris."], embed)
    assert 0.0 <= far < close < 1.0
    assert close > 0.8
    # an empty or failed answer counts 0 and pulls the mean down
    mixed = semantic_fidelity(["The capital of France is Paris.", ""], ["The capital of France is Paris."] * 2, embed)
    assert mixed == pytest.approx(0.5, abs=1e-5)


def test_task_composite_needs_serving_stats_and_reference_answers(embed):
    serving = {"throughput": {"output_tokens_per_s": 250.0}, "ttft_s": {"p95": 0.05}, "e2e_s": {"p95": 0.5}}
    gold = [{"answers": ["6084690"]}, {"answers": ["blue whale"]}]
    score, reason = task_composite(serving, ("score", 0.5), [" 6084690.", "no idea"], gold, CompositeConfig(), embed)
    assert reason is None and score is not None
    assert score.throughput == pytest.approx(0.25) and score.latency == pytest.approx(0.75)
    assert score.recall == 0.5 and score.fidelity_n == 2 and 0 < score.fidelity < 1
    e2e, _ = task_composite(
        serving, ("score", 0.5), [" 6084690.", "no idea"], gold, CompositeConfig(latency="e2e"), embed
    )
    assert e2e is not None and e2e.latency == 0.0 and e2e.latency_p95_s == 0.5
    assert task_composite(None, ("score", 0.5), [], [], CompositeConfig(), embed) == (None, None)
    none, why = task_composite(serving, ("score", 0.5), ["x"], [{"spans": []}], CompositeConfig(), embed)
    assert none is None and "reference answers" in why
    none, why = task_composite(serving, ("perplexity", 12.0), ["x"], gold[:1], CompositeConfig(), embed)
    assert none is None and "0-1" in why


def test_composite_is_in_the_run_file_schema():
    schema = TaskResult.model_json_schema()
    assert "composite" in schema["properties"]
    assert set(schema["$defs"]["CompositeScore"]["required"]) >= {"value", "weights", "throughput", "fidelity"}


AUDIT_COSINE = 0.373521  # the audit's MiniLM cosine of each of the 2 successful answers (issue 38)


def _fake_embed(texts: list[str]) -> np.ndarray:
    """Every reference on [1, 0]; an answer 'hit' on it (cosine 1), any other answer at cosine AUDIT_COSINE."""
    c = AUDIT_COSINE
    table = {"ref": [1.0, 0.0], "hit": [1.0, 0.0]}
    return np.array([table.get(t, [c, (1 - c * c) ** 0.5]) for t in texts])


def _served(recall: float, statuses: list[str], answers: list[str]) -> CompositeScore:
    samples = [Sample(f"s{i}", "ctx", "q", {"answers": ["ref"]}, {"target_tokens": 1024}) for i in range(5)]
    records = [{"status": st, "answer": a if st == "ok" else None} for st, a in zip(statuses, answers, strict=True)]
    pooled = MetricResult(metric="score", length=None, value=recall, n=2, ci95=(0.0, 1.0))
    serving = {"throughput": {"output_tokens_per_s": 137.08}, "ttft_s": {"p95": 0.037808}}
    result = TaskResult.model_construct(results=[pooled], warnings=[], serving=serving)
    out = with_composite(result, "score", samples, records)
    assert out.composite is not None
    return out.composite


def test_a_failed_request_counts_zero_in_the_composite(monkeypatch):
    monkeypatch.setattr(composite_module, "_EMBED", _fake_embed)
    statuses = ["ok", "error", "error", "ok", "error"]
    c = _served(0.0, statuses, ["other", "", "", "other", ""])
    # the documented formula by hand: fidelity over all 5 with each failure 0; recall 0 as in the audit
    throughput, latency, fidelity = 137.08 / 1000, 1 - 0.037808 / 0.2, 2 * AUDIT_COSINE / 5
    assert c.fidelity == pytest.approx(fidelity) and c.fidelity_n == 5 and c.failed_as_zero == 3
    assert c.value == pytest.approx(0.3 * throughput + 0.25 * latency + 0.25 * 0.0 + 0.2 * fidelity)
    assert round(c.value, 3) == 0.274  # was 0.319 with the failures left out
    # recall: the pooled metric over the 2 successes (0.5) counts the 3 failures 0 too
    c = _served(0.5, statuses, ["hit", "", "", "other", ""])
    assert c.recall == pytest.approx(0.5 * 2 / 5) and c.fidelity == pytest.approx((1 + AUDIT_COSINE) / 5)
    # nothing failed: unchanged, and the count says 0
    c = _served(0.5, ["ok"] * 5, ["hit", "other", "other", "other", "other"])
    assert c.recall == 0.5 and c.failed_as_zero == 0 and c.fidelity == pytest.approx((1 + 4 * AUDIT_COSINE) / 5)


def test_the_failed_count_is_shown_in_words():
    c = composite_score(
        output_tokens_per_s=137.08, latency_p95_s=0.04, recall=0.2, recall_metric="score", fidelity=0.1,
        fidelity_n=5, failed=3,
    )  # fmt: skip
    assert composite_sentence(c).endswith("(3 of 5 failed requests counted 0)")
    assert failed_note(c) == " (3 failed requests counted 0)"
    assert composite_rows([("m", TaskResult.model_construct(composite=c))])[0][1].endswith("counted 0)")
    none = c.model_copy(update={"failed_as_zero": 0})
    assert composite_sentence(none) == f"composite {none.value:.3f}" and failed_note(none) == ""
