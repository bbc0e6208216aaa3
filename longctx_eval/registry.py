"""One generic, lazy registry: tasks, model kinds, dataset builders and haystack sources all use it.

Entries are registered by name, either as objects or as lazy "module:attribute" references that are
imported on first lookup; plugin modules and an entry-point group are loaded the first time the registry is
read. Lookups of unknown names are one-line errors with "did you mean".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from longctx_eval.errors import ConfigError, TaskDefinitionError, did_you_mean

T = TypeVar("T")


@dataclass(frozen=True)
class _Lazy:
    """A "module:attribute" reference resolved on first lookup."""

    target: str
    source: str

    def resolve(self, registry: str, name: str) -> object:
        module, _, attr = self.target.partition(":")
        try:
            obj = importlib.import_module(module)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise TaskDefinitionError(
                f"{registry} {name!r} ({self.target}, registered by {self.source}) cannot be loaded: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return obj


class Registry(Generic[T]):
    """Named entries of one kind (e.g. "model kind"), with lazy plugin loading and did-you-mean lookups."""

    def __init__(
        self,
        kind: str,
        *,
        modules: tuple[str, ...] = (),
        entry_point_group: str | None = None,
        check: Callable[[str, object], T] | None = None,
    ) -> None:
        self.kind = kind
        self.modules = modules
        self.entry_point_group = entry_point_group
        self._check = check
        self._entries: dict[str, T | _Lazy] = {}
        self._sources: dict[str, str] = {}
        self._loaded = False

    def register(self, name: str, obj: T | str, *, source: str = "") -> None:
        """Add `obj` (or a lazy "module:attribute" string) under `name`; a clash with another source fails."""
        if not isinstance(name, str) or not name:
            raise TaskDefinitionError(f"{source or '<unknown>'}: {self.kind} name {name!r} must be a non-empty string")
        held = self._sources.get(name)
        if held is not None and held != source:
            raise TaskDefinitionError(f"{self.kind} {name!r} is defined twice: {held} and {source or '<unknown>'}")
        self._entries[name] = _Lazy(obj, source) if isinstance(obj, str) else obj
        self._sources[name] = source

    def load_plugins(self) -> None:
        """Import the built-in modules and the entry-point group once, so their registrations are present."""
        if self._loaded:
            return
        self._loaded = True
        for module in self.modules:
            importlib.import_module(module)
        if self.entry_point_group:
            for ep in entry_points(group=self.entry_point_group):
                if ep.name in self._entries:
                    continue
                try:
                    obj = ep.load()
                except Exception as exc:  # a broken third-party plugin is named, not a traceback
                    raise TaskDefinitionError(
                        f"entry point {ep.name!r} ({ep.value}) in group {self.entry_point_group!r} failed to load: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                if ep.name not in self._entries:
                    self.register(ep.name, obj, source=f"entry point {ep.value}")

    def get(self, name: str) -> T:
        """The entry called `name`, resolved; ConfigError with a suggestion when there is none."""
        self.load_plugins()
        entry = self._entries.get(name)
        if entry is None:
            raise ConfigError(f"unknown {self.kind} {name!r}.{did_you_mean(name, self._entries)}")
        if isinstance(entry, _Lazy):
            obj = entry.resolve(self.kind, name)
            entry = self._check(name, obj) if self._check else obj  # type: ignore[assignment]
            self._entries[name] = entry
        return entry  # type: ignore[return-value]

    __getitem__ = get

    def values(self) -> list[T]:
        """Every entry, resolved, in name order."""
        return [obj for _, obj in self.items()]

    def source(self, name: str) -> str:
        """Where `name` was registered (a file, a module or an entry point)."""
        self.load_plugins()
        return self._sources.get(name, "")

    def names(self) -> list[str]:
        """Every registered name, sorted (for --help and error messages)."""
        self.load_plugins()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self.load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        """Every entry, resolved, by name."""
        return [(n, self.get(n)) for n in self.names()]
