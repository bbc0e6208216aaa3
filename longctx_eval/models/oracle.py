"""The oracle: answers every request with its task's `oracle(sample)`, so a scorer can be checked to give 100%."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from longctx_eval.capability import ALL_CAPABILITIES, Capability
from longctx_eval.models.assets import load_tokenizer
from longctx_eval.models.base import ModelAdapter, model_meta
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.sample import Prediction, Request, Sample

if TYPE_CHECKING:
    from longctx_eval.task import Task


ORACLE_GOLD_LOGPROB = 0.0
"""The oracle's log-probability of a gold choice (certain); every other choice gets ORACLE_OTHER_LOGPROB."""
ORACLE_OTHER_LOGPROB = -100.0


class OracleAdapter(ModelAdapter):
    """Serves every capability once bound to a task (`bind`); unbound, it has no answers to give."""

    capabilities = ALL_CAPABILITIES

    def __init__(self, spec: ModelSpec) -> None:
        tok = load_tokenizer("minilm")
        super().__init__(model_meta(spec, tok, self.capabilities), tok)

    def bind(self, task: Task, samples: Sequence[Sample]) -> ModelAdapter:
        """An adapter answering each request of `samples` from `task.oracle(sample)`."""
        return BoundOracle(self, task, samples)

    def serve(self, capability: Capability | str, requests: Sequence[Request]) -> list[Prediction]:
        raise RuntimeError("the oracle answers only once bound to a task: adapter.bind(task, samples).serve(...)")


class BoundOracle(ModelAdapter):
    """The oracle for one task's samples: the same identity, answers looked up by `request.sample_id`."""

    capabilities = ALL_CAPABILITIES

    def __init__(self, oracle: OracleAdapter, task: Task, samples: Sequence[Sample]) -> None:
        super().__init__(oracle.meta, oracle.tokenizer)
        self.task = task
        self.samples = {s.id: s for s in samples}

    def serve(self, capability: Capability | str, requests: Sequence[Request]) -> list[Prediction]:
        """The gold answer of each request (the request's part of it when the task sends several)."""
        Capability(capability)  # an unknown capability is an error here too
        return [self._answer(r) for r in requests]

    def _answer(self, request: Request) -> Prediction:
        if request.choices and "gold_choice" in request.extra:
            return self._choose(request, request.extra["gold_choice"])
        sample = self.samples.get(request.sample_id)
        if sample is None:
            raise ValueError(f"oracle: request for sample {request.sample_id!r}, which the bound samples lack")
        gold = self.task.oracle(sample)
        if gold.parts:
            if not 0 <= request.part < len(gold.parts):
                raise ValueError(
                    f"oracle: sample {sample.id!r} has {len(gold.parts)} answer part(s); request part {request.part}"
                )
            gold = gold.parts[request.part]
        return replace(gold, prompt_tokens=self.prompt_tokens(request))

    def _choose(self, request: Request, gold: object) -> Prediction:
        """A log-likelihood answer scoring the gold choice (`extra["gold_choice"]`, its index) highest."""
        if not isinstance(gold, int) or isinstance(gold, bool) or not 0 <= gold < len(request.choices):
            raise ValueError(
                f"oracle: request {request.sample_id!r} part {request.part}: extra['gold_choice'] must be a choice "
                f"index 0..{len(request.choices) - 1}, got {gold!r}"
            )
        data = {
            "logprobs": [
                ORACLE_GOLD_LOGPROB if i == gold else ORACLE_OTHER_LOGPROB for i in range(len(request.choices))
            ],
            "choice_tokens": [self.tokenizer.count(c) for c in request.choices],
            "greedy": [i == gold for i in range(len(request.choices))],
        }
        return Prediction(prompt_tokens=self.prompt_tokens(request), completion_tokens=0, data=data)

    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        return self.serve(Capability.GENERATE, requests)

    def loglikelihood(self, requests: Sequence[Request]) -> list[Prediction]:
        return self.serve(Capability.LOGLIKELIHOOD, requests)

    def retrieve(self, requests: Sequence[Request]) -> list[Prediction]:
        return self.serve(Capability.RETRIEVE, requests)

    def attention_stats(self, requests: Sequence[Request]) -> list[Prediction]:
        return self.serve(Capability.ATTENTION, requests)

    def predict_clusters(self, requests: Sequence[Request]) -> list[Prediction]:
        return self.serve(Capability.COREF, requests)
