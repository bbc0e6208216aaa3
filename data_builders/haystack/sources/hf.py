"""The `hf:<name>[:<config>][?column=text&split=train&revision=R&shuffle=8]` source: a streamed HF dataset column."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from data_builders.haystack.assembly import _split_paragraphs
from longctx_eval.errors import ConfigError, DataError, PrerequisiteError, did_you_mean
from longctx_eval.hashing import sha256_json

FORM = "hf:<name>[:<config>][?column=text&split=train&revision=<commit>&shuffle=8]"


@dataclass(frozen=True)
class HFSpec:
    """A parsed `hf:` source spec."""

    name: str
    config: str | None = None
    column: str = "text"
    split: str = "train"
    revision: str | None = None
    shuffle: int = 8  # buffer of rows the seed shuffles (0: stream order, the seed is ignored)


def parse_hf_spec(arg: str) -> HFSpec:
    """Parse what follows `hf:`; unknown options and a missing name are ConfigErrors naming the form."""
    path, _, query = arg.partition("?")
    name, _, config = path.partition(":")
    if not name:
        raise ConfigError(f"haystack source 'hf' needs a dataset name: expected {FORM}, e.g. hf:deepmind/pg19")
    options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=False)) if query else {}
    known = ("column", "split", "revision", "shuffle")
    for key in options:
        if key not in known:
            raise ConfigError(f"unknown option {key!r} in haystack source 'hf:{arg}'." + did_you_mean(key, known))
    shuffle = options.get("shuffle", "8")
    if not shuffle.isdigit():
        raise ConfigError(f"option shuffle={shuffle!r} in 'hf:{arg}': expected a whole number of rows (0 = off)")
    return HFSpec(
        name=name,
        config=config or None,
        column=options.get("column") or "text",
        split=options.get("split") or "train",
        revision=options.get("revision") or None,
        shuffle=int(shuffle),
    )


class HFSource:
    """Paragraphs of one text column of a Hugging Face dataset, streamed (only what a length needs is read).

    `sha256` identifies the request (name, config, split, column, revision), not the bytes served:
    pin `revision=<commit>` for a reproducible dataset.
    """

    def __init__(self, arg: str) -> None:
        self.spec = parse_hf_spec(arg)
        self.name = f"hf:{arg}"
        self.sha256 = sha256_json({"source": "hf", **self.spec.__dict__})
        self._dataset = self._load()

    def _load(self) -> Any:
        spec = self.spec
        try:
            import datasets
        except ImportError as exc:
            raise PrerequisiteError(f"haystack source {self.name!r} needs `pip install datasets`") from exc
        try:
            ds = datasets.load_dataset(spec.name, spec.config, split=spec.split, revision=spec.revision, streaming=True)
        except (ConnectionError, OSError, ValueError) as exc:  # offline, unknown name, config or split
            raise PrerequisiteError(
                f"haystack source {self.name!r}: dataset {spec.name!r}"
                f"{f' (config {spec.config!r})' if spec.config else ''} cannot be loaded: "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}. It needs network access "
                "to the Hugging Face Hub (unset HF_DATASETS_OFFLINE/HF_HUB_OFFLINE), or a local dataset folder."
            ) from exc
        columns = getattr(ds, "column_names", None)
        if columns is not None and spec.column not in columns:
            raise ConfigError(
                f"haystack source {self.name!r}: no column {spec.column!r}; expected one of {columns} "
                "(choose with ?column=<name>)"
            )
        return ds

    def paragraphs(self, seed: int) -> Iterator[str]:
        ds = self._dataset
        if self.spec.shuffle:
            ds = ds.shuffle(seed=seed % 2**32, buffer_size=self.spec.shuffle)
        try:
            for row in ds:
                value = row.get(self.spec.column)
                if not isinstance(value, str):
                    raise DataError(
                        f"haystack source {self.name!r}: column {self.spec.column!r} holds "
                        f"{type(value).__name__}, expected text"
                    )
                yield from _split_paragraphs(value)
        except (ConnectionError, OSError) as exc:
            raise PrerequisiteError(f"haystack source {self.name!r}: streaming failed: {exc}") from exc
