"""The composite serving score: its documented normalisation, weights, and semantic fidelity with the real MiniLM."""

from __future__ import annotations

import pytest

from longctx_eval.errors import ConfigError
from longctx_eval.results import TaskResult
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
)


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
