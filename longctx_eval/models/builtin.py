"""Registers the built-in adapter families with the spec grammar; each loads its heavy imports lazily."""

from __future__ import annotations

from longctx_eval.models.base import ModelAdapter
from longctx_eval.models.spec import AdapterKind, ModelSpec, register_kind


def _hf(spec: ModelSpec) -> ModelAdapter:
    from longctx_eval.models.hf import HFCausalLM

    return HFCausalLM(spec)


def _retriever(spec: ModelSpec) -> ModelAdapter:
    from longctx_eval.models.dense import DenseRetriever

    return DenseRetriever(spec)


def _bm25(spec: ModelSpec) -> ModelAdapter:
    from longctx_eval.models.bm25 import BM25Retriever

    return BM25Retriever(spec)


def _oracle(spec: ModelSpec) -> ModelAdapter:
    from longctx_eval.models.oracle import OracleAdapter

    return OracleAdapter(spec)


register_kind(
    AdapterKind(
        "hf",
        frozenset(
            {
                "dtype",
                "max_length",
                "chat",
                "revision",
                "gguf_file",
                "batch_size",
                "rope",
                "rope_factor",
                "train_length",
            }
        ),
        True,
        _hf,
        "hf:<path-or-hub-id>[?dtype=float32&max_length=N&chat=auto&revision=R&gguf_file=F&batch_size=1"
        "&rope=none|linear|dynamic|yarn|yarn_notemp&rope_factor=F&train_length=N]",
    )
)
register_kind(
    AdapterKind(
        "retriever",
        frozenset({"batch_size", "device"}),
        True,
        _retriever,
        "retriever:<sentence-transformers path|minilm>[?batch_size=64&device=cpu]",
    )
)
register_kind(AdapterKind("bm25", frozenset({"k1", "b"}), False, _bm25, "bm25[?k1=1.5&b=0.75]"))
register_kind(AdapterKind("oracle", frozenset(), False, _oracle, "oracle"))


def _coref(spec: ModelSpec) -> ModelAdapter:
    from longctx_eval.errors import ConfigError
    from longctx_eval.models.coref_baseline import CorefBaseline

    if spec.target != "baseline":
        raise ConfigError(f"model spec {spec.raw!r}: unknown coref system {spec.target!r}; expected coref:baseline")
    return CorefBaseline(spec)


register_kind(AdapterKind("coref", frozenset({"window"}), True, _coref, "coref:baseline[?window=40]"))
