"""Loading what a parsed spec names: the adapter (weights and all) or only its tokenizer."""

from __future__ import annotations

from longctx_eval.models.base import ModelAdapter
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.spec import ModelSpec
from longctx_eval.text.tokenizer import Tokenizer


def load_model(spec: ModelSpec) -> ModelAdapter:
    """Load the adapter of a parsed spec (imports its kind's module now)."""
    return MODEL_KINDS.get(spec.kind).load(spec)


def load_tokenizer_of(spec: ModelSpec) -> Tokenizer:
    """The tokenizer the spec's model measures lengths in, loaded without its weights."""
    return MODEL_KINDS.get(spec.kind).load_tokenizer(spec)
