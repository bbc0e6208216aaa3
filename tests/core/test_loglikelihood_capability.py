"""The log-likelihood contract in the core: the capability and its method, the window check counting the prompt plus
the longest choice, the oracle scoring the gold choice highest, and the kinds that declare it."""

from __future__ import annotations

import pytest

from longctx_eval.capability import Capability
from longctx_eval.metrics.aggregate import mean
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.loader import load_model
from longctx_eval.models.spec import parse_spec
from longctx_eval.sample import Request, Sample, Score
from longctx_eval.task import Task


def _ask(choices: tuple[str, ...], gold: object = None, max_new_tokens: int = 32) -> Request:
    extra = {} if gold is None else {"gold_choice": gold}
    return Request("s0", "Mary met Tom. She smiled.", "", "", max_new_tokens, extra=extra, choices=choices)


def test_the_capability_names_its_method_and_needs_the_window():
    assert Capability("loglikelihood") is Capability.LOGLIKELIHOOD
    assert Capability.LOGLIKELIHOOD.method == "loglikelihood" and Capability.LOGLIKELIHOOD.windowed
    for kind in ("hf", "vllm", "openai", "oracle"):
        assert Capability.LOGLIKELIHOOD in MODEL_KINDS.get(kind).serves, kind
    assert Capability.LOGLIKELIHOOD not in MODEL_KINDS.get("coref").serves


def test_the_window_counts_the_prompt_and_the_longest_choice():
    """With choices the generation budget plays no part; without them it is what follows the prompt."""
    oracle = load_model(parse_spec("oracle"))
    oracle.meta = oracle.meta.model_copy(update={"context_window": 100})
    ask = _ask((" Mary", " the tall gardener by the gate"), max_new_tokens=90)
    longest = oracle.tokenizer.count(" the tall gardener by the gate")
    assert oracle.choice_tokens(ask) == longest > oracle.tokenizer.count(" Mary")
    assert oracle.output_tokens(ask) == longest
    assert oracle.fits(ask, 100 - longest) and not oracle.fits(ask, 101 - longest)
    plain = _ask((), max_new_tokens=90)
    assert oracle.output_tokens(plain) == 90 and oracle.fits(plain, 10) and not oracle.fits(plain, 11)


def test_the_oracle_scores_the_gold_choice_highest():
    oracle = load_model(parse_spec("oracle"))
    samples = [Sample("s0", "Mary met Tom. She smiled.", "q", {"antecedent": 0}, {"target_tokens": 8})]
    task = Task(samples, lambda s: [_ask((" Mary", " Tom"), 0)], lambda s, p: Score({"score": 1.0}), [mean("score")])
    bound = oracle.bind(task, samples)
    for gold in (0, 1):
        pred = bound.serve(Capability.LOGLIKELIHOOD, [_ask((" Mary", " Tom", " it"), gold)])[0]
        lps = pred.data["logprobs"]
        assert pred.status == "ok" and max(range(3), key=lps.__getitem__) == gold and lps.count(max(lps)) == 1
        assert pred.data["greedy"] == [i == gold for i in range(3)] and pred.data["choice_tokens"][0] == 1
        assert pred.completion_tokens == 0 and pred.prompt_tokens == oracle.tokenizer.count(_ask(()).prompt)
    with pytest.raises(ValueError, match=r"gold_choice.*0\.\.1, got 2"):
        bound.serve(Capability.LOGLIKELIHOOD, [_ask((" Mary", " Tom"), 2)])


def test_an_adapter_without_the_method_says_so():
    bm25 = load_model(parse_spec("bm25"))
    with pytest.raises(NotImplementedError, match="does not serve 'loglikelihood'"):
        bm25.serve(Capability.LOGLIKELIHOOD, [_ask((" a",))])
