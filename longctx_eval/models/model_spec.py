"""The parsed model spec, a record alone: every module that takes a spec imports it from here, none parses."""

from __future__ import annotations

from dataclasses import dataclass

from longctx_eval.models.options import KindOptions


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: the adapter kind, its target (path, hub id, packaged name), typed options, display name."""

    raw: str
    kind: str
    target: str
    options: KindOptions
    name: str
    parts: tuple[ModelSpec, ...] = ()
    """A composite kind's inner specs (`rag`: retriever, generator), parsed and checked with it."""
