"""A dataset written by `longctx-eval build`, read from its card: builder, lengths, seed and data files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from longctx_eval.errors import ConfigError


@dataclass(frozen=True)
class BuiltDataset:
    """The facts of a built dataset folder that an export needs (from its README.md front matter)."""

    folder: Path
    builder: str
    lengths: tuple[int, ...]
    seed: int
    tokenizer: str
    data_files: dict[str, tuple[str, ...]]  # config name -> its parquet files, relative to the folder

    def config_of(self, length: int) -> str:
        """The config holding the rows of one length (`needle_1024`)."""
        return f"{self.builder}_{length}"

    def parquet_of(self, length: int) -> Path:
        """The absolute path of one length's parquet file."""
        return (self.folder / self.data_files[self.config_of(length)][0]).resolve()


def read_built(folder: Path, where: str = "--dataset") -> BuiltDataset:
    """The built dataset in `folder`; ConfigError naming `where` when the folder holds none."""
    card = folder / "README.md"
    if not card.is_file():
        raise ConfigError(
            f"{where} {folder}: no README.md dataset card; expected a folder written by `longctx-eval build`"
        )
    text = card.read_text(encoding="utf-8", errors="replace")
    head = text.split("---\n")[1] if text.startswith("---\n") and text.count("---\n") >= 2 else ""
    try:
        meta: Any = yaml.safe_load(head) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where} {card}: the front matter is not valid YAML ({exc})") from None
    info = meta.get("longctx_eval") if isinstance(meta, dict) else None
    if not isinstance(info, dict) or not isinstance(info.get("builder"), str):
        raise ConfigError(
            f"{where} {card}: the card has no `longctx_eval.builder`; "
            "expected a dataset written by `longctx-eval build`"
        )
    files: dict[str, tuple[str, ...]] = {}
    for entry in meta.get("configs") or []:
        paths: list[str] = []
        for f in entry.get("data_files") or []:
            path = f.get("path") if isinstance(f, dict) else None
            paths.extend([path] if isinstance(path, str) else [p for p in path or [] if isinstance(p, str)])
        files[str(entry.get("config_name"))] = tuple(paths)
    built = BuiltDataset(
        folder=folder.resolve(),
        builder=info["builder"],
        lengths=tuple(int(n) for n in info.get("lengths") or ()),
        seed=int(info.get("seed", 0)),
        tokenizer=str((info.get("tokenizer") or {}).get("name", "")),
        data_files=files,
    )
    for length in built.lengths:
        listed: Sequence[str] = files.get(built.config_of(length), [])
        if len(listed) != 1 or not (folder / listed[0]).is_file():
            raise ConfigError(
                f"{where} {folder}: the card lists config {built.config_of(length)!r} but its file is missing"
            )
    return built
