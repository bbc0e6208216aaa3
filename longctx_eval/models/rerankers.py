"""The second-stage reranker registry: `?rerank=NAME&rerank_depth=N` on a retriever, bm25 or hybrid spec.

A reranker factory is called as `factory(device=..., batch_size=..., shared=...)` and returns an object with
`name`, `identity()` and `score(query, texts) -> one score per text` (`Reranker`); `shared`
holds models the retriever already loaded (e.g. {"minilm": SentenceTransformer}) so they are not loaded twice.
Built in: `maxsim`. Plugins register under the entry-point group `longctx_eval.rerankers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.registry import Registry


class Reranker(Protocol):
    """A second stage: rescores a few candidate chunk texts for a query (the factories below build one)."""

    name: str

    def identity(self) -> dict[str, Any]:
        """What its scores depend on (model weights, settings)."""
        ...

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One score per candidate, higher is better."""
        ...


RerankerFactory = Callable[..., Reranker]


def _check(name: str, obj: object) -> RerankerFactory:
    if not callable(obj):
        raise TaskDefinitionError(f"reranker {name!r} is a {type(obj).__name__}; expected a factory callable")
    return obj


RERANKERS: Registry[RerankerFactory] = Registry("reranker", entry_point_group="longctx_eval.rerankers", check=_check)
RERANKERS.register("maxsim", "longctx_eval.models.retrieval.rerank_maxsim:MaxSimReranker", source=__name__)


def reranker_names() -> list[str]:
    """Every registered reranker name (for option checks and error messages)."""
    return RERANKERS.names()


def load_reranker(name: str, *, device: str, batch_size: int, shared: Mapping[str, Any]) -> Reranker:
    """Build reranker `name` (ConfigError with a suggestion when unknown)."""
    return RERANKERS.get(name)(device=device, batch_size=batch_size, shared=shared)
