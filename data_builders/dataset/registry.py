"""The dataset-builder registry: `@builder(...)` registers a function that yields one `Part` per config."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from datasets import Features

from data_builders.haystack.assembly import HaystackSource
from longctx_eval.errors import ConfigError, TaskDefinitionError, did_you_mean
from longctx_eval.registry import Registry
from longctx_eval.text.tokenizer import Tokenizer

# In-tree builder modules, imported on the first lookup; add yours here (or use the entry-point group).
BUILTIN_MODULES: tuple[str, ...] = (
    "data_builders.needle.builder",
    "data_builders.needle.variant_builder",
    "data_builders.coref.builder",
    "data_builders.cross_paragraph.builder",
    "data_builders.retrieval.builder",
    "data_builders.mrcr.builder",
)
ENTRY_POINT_GROUP = "longctx_eval.builders"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class BuildConfig:
    """What to build: lengths in tokens, the depth grid, repetitions per cell, seed and the haystack source spec."""

    lengths: tuple[int, ...]
    depths: int = 10
    per_cell: int = 1
    seed: int = 0
    source: str = "default"
    options: Mapping[str, str] = field(default_factory=dict)  # builder-specific, checked against its `options`

    def __post_init__(self) -> None:
        if not self.lengths or any(not _positive(n) for n in self.lengths):
            raise ConfigError(f"--lengths: expected positive token counts such as 1k,4k,1M, got {self.lengths!r}")
        if len(set(self.lengths)) != len(self.lengths):
            raise ConfigError(f"--lengths: {list(self.lengths)} repeats a length; expected each length once")
        for name in ("depths", "per_cell"):
            if not _positive(getattr(self, name)):
                raise ConfigError(
                    f"--{name.replace('_', '-')}: expected a positive integer, got {getattr(self, name)!r}"
                )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"--seed: expected a non-negative integer, got {self.seed!r}")


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class Document:
    """A long text stored once in the `documents` config; samples refer to it by `doc_id`."""

    doc_id: str
    text: str
    n_tokens: int


@dataclass(frozen=True)
class Part:
    """One config of the dataset (e.g. `needle_4096`): its sample rows and the documents they reference."""

    config_name: str
    samples: Sequence[Mapping[str, Any]]
    documents: Sequence[Document] = ()
    features: Features | None = None  # this config's features when they differ from the builder's


@dataclass(frozen=True)
class BuildContext:
    """What a builder function receives: the config, the resolved source and tokenizer, a progress hook."""

    config: BuildConfig
    source: HaystackSource
    tokenizer: Tokenizer
    advance: Callable[[int], None] = lambda n: None  # called with the number of samples just finished


BuildFn = Callable[[BuildContext], Iterator[Part]]


@dataclass(frozen=True)
class CardInfo:
    """What a builder adds to the dataset card: Hub tags and categories, and how to use the rows."""

    tags: tuple[str, ...] = ()
    task_categories: tuple[str, ...] = ()
    usage: str | Callable[[BuildConfig], str] = ""  # markdown: how to turn rows into model inputs
    prompt_template: str = ""  # str.format template over row fields, e.g. "{context}\n\nQuestion: {question}"
    scoring: str = ""  # markdown: how a prediction is scored, so results can be reproduced without this code
    license: str | None = None  # HF license id of the rows when the builder's corpus decides it (not the source)


@dataclass(frozen=True)
class BuilderInfo:
    """A registered builder: its name, version (bump when its bytes change), sample features and function."""

    name: str
    version: str
    fn: BuildFn
    features: Features
    description: str
    total: Callable[[BuildConfig], int] | None = None  # number of samples, for the progress bar
    options: Mapping[str, str] = field(default_factory=dict)  # accepted option name -> help
    card: CardInfo = CardInfo()
    source: str = ""  # the file that registered it


def _as_info(name: str, obj: object) -> BuilderInfo:
    """A registry entry as a BuilderInfo: entry points name a `@builder` function (or its module)."""
    info = obj if isinstance(obj, BuilderInfo) else getattr(obj, "__longctx_builder__", None)
    if not isinstance(info, BuilderInfo):
        raise TaskDefinitionError(
            f"builder {name!r} ({obj!r}) is not a registered builder; expected the entry point in group "
            f"{ENTRY_POINT_GROUP!r} to name a @builder function as module:function"
        )
    if info.name != name:
        raise TaskDefinitionError(f"entry point {name!r} names builder {info.name!r}; expected the same name")
    return info


BUILDERS: Registry[BuilderInfo] = Registry(
    "dataset builder", modules=BUILTIN_MODULES, entry_point_group=ENTRY_POINT_GROUP, check=_as_info
)
"""Every dataset builder by name; `@builder` registers into it."""


def builder(
    name: str,
    *,
    version: str,
    features: Features,
    description: str,
    total: Callable[[BuildConfig], int] | None = None,
    options: Mapping[str, str] | None = None,
    card: CardInfo | None = None,
) -> Callable[[BuildFn], BuildFn]:
    """Register `fn(ctx) -> Iterator[Part]` as dataset builder `name`; malformed registrations fail here."""

    def register(fn: BuildFn) -> BuildFn:
        where = inspect.getsourcefile(fn) or fn.__module__
        if not isinstance(name, str) or not _NAME.match(name):
            raise TaskDefinitionError(f"{where}: builder name {name!r}; expected lowercase letters, digits and '_'")
        if not isinstance(version, str) or not version:
            raise TaskDefinitionError(f"{where}: builder {name!r} version {version!r}; expected a non-empty string")
        if not isinstance(features, Features):
            raise TaskDefinitionError(f"{where}: builder {name!r} features must be a datasets.Features")
        if name in BUILDERS and BUILDERS.source(name) != where:
            raise TaskDefinitionError(f"{where}: builder {name!r} is already registered by {BUILDERS.source(name)}")
        info = BuilderInfo(
            name=name,
            version=version,
            fn=fn,
            features=features,
            description=description,
            total=total,
            options=dict(options or {}),
            card=card or CardInfo(),
            source=where,
        )
        BUILDERS.register(name, info, source=where)
        fn.__longctx_builder__ = info  # type: ignore[attr-defined]  # what an entry point resolves to
        return fn

    return register


def _names() -> list[str]:
    # An entry point may name a module whose import registers its builders (the older convention): not a builder.
    return [n for n in BUILDERS.names() if not isinstance(BUILDERS.get(n), ModuleType)]


def builders() -> dict[str, BuilderInfo]:
    """Every registered builder by name (in-tree modules and the `longctx_eval.builders` entry points)."""
    return {n: _as_info(n, BUILDERS.get(n)) for n in _names()}


def get_builder(name: str) -> BuilderInfo:
    """The builder called `name`; ConfigError with a suggestion if there is none."""
    known = _names()
    if name not in known:
        raise ConfigError(f"unknown dataset builder {name!r}." + did_you_mean(name, known))
    return _as_info(name, BUILDERS.get(name))


def check_options(info: BuilderInfo, options: Mapping[str, str]) -> None:
    """Reject options the builder does not declare, naming the ones it does."""
    for key in options:
        if key not in info.options:
            raise ConfigError(f"builder {info.name!r} has no option {key!r}." + did_you_mean(key, info.options))
