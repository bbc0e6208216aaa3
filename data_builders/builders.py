"""The dataset-builder registry: `@builder(...)` registers a function that yields one `Part` per config."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from datasets import Features

from data_builders.haystack import HaystackSource
from longctx_eval.errors import ConfigError, TaskDefinitionError, did_you_mean
from longctx_eval.text.tokenizer import Tokenizer

# In-tree builder modules, imported on the first lookup; add yours here (or use the entry-point group).
BUILTIN_MODULES: tuple[str, ...] = ("data_builders.needle_dataset",)
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
    usage: str = ""  # markdown: how to turn rows into model inputs


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


_BUILDERS: dict[str, BuilderInfo] = {}
_loaded = False


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
        old = _BUILDERS.get(name)
        if old is not None and old.source != where:
            raise TaskDefinitionError(f"{where}: builder {name!r} is already registered by {old.source}")
        _BUILDERS[name] = BuilderInfo(
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
        return fn

    return register


def _load_plugins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:  # a broken third-party plugin is named, not hidden behind a traceback
            raise TaskDefinitionError(f"builder entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from exc


def builders() -> dict[str, BuilderInfo]:
    """Every registered builder by name (in-tree modules and the `longctx_eval.builders` entry points)."""
    _load_plugins()
    return dict(_BUILDERS)


def get_builder(name: str) -> BuilderInfo:
    """The builder called `name`; ConfigError with a suggestion if there is none."""
    known = builders()
    if name not in known:
        raise ConfigError(f"unknown dataset builder {name!r}." + did_you_mean(name, known))
    return known[name]


def check_options(info: BuilderInfo, options: Mapping[str, str]) -> None:
    """Reject options the builder does not declare, naming the ones it does."""
    for key in options:
        if key not in info.options:
            raise ConfigError(f"builder {info.name!r} has no option {key!r}." + did_you_mean(key, info.options))
