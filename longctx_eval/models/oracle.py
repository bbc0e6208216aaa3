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

    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        return self.serve(Capability.GENERATE, requests)

    def retrieve(self, requests: Sequence[Request]) -> list[Prediction]:
        return self.serve(Capability.RETRIEVE, requests)

    def attention_stats(self, requests: Sequence[Request]) -> list[Prediction]:
        return self.serve(Capability.ATTENTION, requests)

    def predict_clusters(self, requests: Sequence[Request]) -> list[Prediction]:
        return self.serve(Capability.COREF, requests)
