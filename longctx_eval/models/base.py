"""The model-adapter protocol: batch-first methods, declared capabilities, measured metadata."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from longctx_eval.sample import Prediction, Request
from longctx_eval.text.tokenizer import Tokenizer


@dataclass(frozen=True)
class ModelInfo:
    """What a run file records about a model so that a result can be traced to exact weights."""

    spec: str
    name: str
    kind: str
    tokenizer: str
    revision: str | None = None
    sha256: str | None = None
    params: int | None = None
    dtype: str | None = None
    tokenizer_sha256: str | None = None
    chat_template_sha256: str | None = None
    context_window: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)


CAPABILITY_METHODS = {
    "generate": "generate",
    "loglikelihood": "loglikelihood",
    "retrieve": "retrieve",
    "attention": "attention_stats",
    "coref": "predict_clusters",
}
"""The adapter method that serves each capability; every method takes a batch of requests."""


class ModelAdapter:
    """Base of every adapter; subclasses set `capabilities` and implement the methods they declare."""

    capabilities: frozenset[str] = frozenset()

    def __init__(self, info: ModelInfo, tokenizer: Tokenizer) -> None:
        self.info = info
        self.tokenizer = tokenizer

    @property
    def identity(self) -> dict[str, Any]:
        """What keys a prediction: model id, revision, weights hash and the generation/retrieval settings."""
        i = self.info
        return {"name": i.name, "spec": i.spec, "revision": i.revision, "sha256": i.sha256, **i.settings}

    def prompt_tokens(self, request: Request) -> int:
        """Measured prompt length of `request` in this model's tokenizer, exactly as it will be sent."""
        return self.tokenizer.count(request.prompt)

    def fits(self, request: Request, prompt_tokens: int) -> bool:
        """Whether prompt plus generation budget fits the context window (always, when there is none)."""
        window = self.info.context_window
        return window is None or prompt_tokens + request.max_new_tokens <= window

    def generate(self, requests: Sequence[Request]) -> list[Prediction]:
        """Greedy completions for a batch of requests."""
        raise NotImplementedError(f"{type(self).__name__} does not serve 'generate'")

    def retrieve(self, requests: Sequence[Request]) -> list[Prediction]:
        """Ranked chunk hits of each request's context for its query."""
        raise NotImplementedError(f"{type(self).__name__} does not serve 'retrieve'")

    def serve(self, capability: str, requests: Sequence[Request]) -> list[Prediction]:
        """Dispatch a batch to the method that serves `capability`."""
        return getattr(self, CAPABILITY_METHODS[capability])(requests)

    def close(self) -> None:
        """Release memory held by the model."""
