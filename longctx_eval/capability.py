"""The model capabilities a task can require and an adapter can serve: one enum, defined once."""

from __future__ import annotations

from enum import StrEnum


class Capability(StrEnum):
    """What a model does with a request; each value names the adapter method that serves it."""

    GENERATE = "generate"
    RETRIEVE = "retrieve"
    ATTENTION = "attention"
    COREF = "coref"
    LOGLIKELIHOOD = "loglikelihood"
    """Each of `Request.choices` scored by its summed log-probability after the rendered prompt (lm-eval's
    multiple choice): base models take it, and the prompt is a prefix shared by every choice."""

    @property
    def method(self) -> str:
        """The batch-first adapter method serving this capability."""
        return _METHODS[self]

    @property
    def windowed(self) -> bool:
        """Whether the prompt must fit the model's context window (retrievers and coref systems read any length);
        for log-likelihood the prompt plus its longest choice."""
        return self in (Capability.GENERATE, Capability.ATTENTION, Capability.LOGLIKELIHOOD)


_METHODS = {
    Capability.GENERATE: "generate",
    Capability.RETRIEVE: "retrieve",
    Capability.ATTENTION: "attention_stats",
    Capability.COREF: "predict_clusters",
    Capability.LOGLIKELIHOOD: "loglikelihood",
}
ALL_CAPABILITIES = frozenset(Capability)
