"""The second-stage reranker registry: `?rerank=NAME&rerank_depth=N` on a retriever, bm25 or hybrid spec.

A reranker factory is called as `factory(device=..., batch_size=..., shared=...)` and returns an object with
`name`, `identity()` and `score(query, texts) -> one score per text` (`chunk_retriever.Reranker`); `shared`
holds models the retriever already loaded (e.g. {"minilm": SentenceTransformer}) so they are not loaded twice.
Built in: `maxsim`. Plugins register under the entry-point group `longctx_eval.rerankers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from longctx_eval.errors import TaskDefinitionError
from longctx_eval.registry import Registry

if TYPE_CHECKING:
    from longctx_eval.models.retrieval.chunk_retriever import Reranker

RerankerFactory = Callable[..., "Reranker"]


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
