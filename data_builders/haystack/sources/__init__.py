"""Haystack sources beyond the built-in ones: `austen` (embedded real prose) and `hf:<name>` (streamed)."""

from __future__ import annotations

import functools

from data_builders.haystack.assembly import HaystackSource, register_source
from data_builders.haystack.sources.austen import AustenSource, corpus_path, ensure_corpus
from data_builders.haystack.sources.austen_corpus import CORPUS_SHA256
from data_builders.haystack.sources.hf import HFSource, parse_hf_spec
from longctx_eval.errors import ConfigError


@functools.cache
def _austen_source() -> AustenSource:
    return AustenSource()  # reads 5 MB once per process, not once per sample


def _austen(arg: str) -> HaystackSource:
    if arg:
        raise ConfigError(f"haystack source 'austen' takes no argument, got {arg!r}")
    return _austen_source()


def _hf(arg: str) -> HaystackSource:
    return HFSource(arg)


register_source("austen", _austen)
register_source("default", _austen)  # the embedded real prose is the default haystack
register_source("hf", _hf)

__all__ = ["CORPUS_SHA256", "AustenSource", "HFSource", "corpus_path", "ensure_corpus", "parse_hf_spec"]
