"""A dataset written by `longctx-eval build`, read from its card: builder, lengths, seed and data files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from longctx_eval.errors import ConfigError
from longctx_eval.run_folder.json_lines import short


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
    """The built dataset in `folder`; ConfigError naming `where`, the card and the field when the folder holds
    none or its card is damaged (a field of the wrong type, a data file outside the folder)."""
    card = folder / "README.md"
    if not card.is_file():
        raise ConfigError(
            f"{where} {folder}: no README.md dataset card; expected a folder written by `longctx-eval build`"
        )
    at = f"{where} {card}"
    meta = _front_matter(card, at)
    info = meta.get("longctx_eval")
    if not isinstance(info, dict) or not isinstance(info.get("builder"), str):
        raise ConfigError(
            f"{at}: the card has no `longctx_eval.builder`; expected a dataset written by `longctx-eval build`"
        )
    files = _data_files(meta.get("configs"), folder, at)
    built = BuiltDataset(
        folder=folder.resolve(),
        builder=info["builder"],
        lengths=_lengths(info.get("lengths"), at),
        seed=_seed(info.get("seed", 0), at),
        tokenizer=_tokenizer_name(info.get("tokenizer"), at),
        data_files=files,
    )
    for length in built.lengths:
        listed: Sequence[str] = files.get(built.config_of(length), [])
        if len(listed) != 1 or not (folder / listed[0]).is_file():
            raise ConfigError(
                f"{where} {folder}: the card lists config {built.config_of(length)!r} but its file is missing"
            )
    return built


def _front_matter(card: Path, at: str) -> dict[str, Any]:
    """The card's YAML front matter as a mapping ({} when it has none)."""
    text = card.read_text(encoding="utf-8", errors="replace")
    head = text.split("---\n")[1] if text.startswith("---\n") and text.count("---\n") >= 2 else ""
    try:
        meta: Any = yaml.safe_load(head) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{at}: the front matter is not valid YAML ({' '.join(str(exc).split())})") from None
    except RecursionError:
        raise ConfigError(f"{at}: the front matter is nested too deeply to read; expected a dataset card") from None
    return meta if isinstance(meta, dict) else {}


def _lengths(value: Any, at: str) -> tuple[int, ...]:
    """`longctx_eval.lengths`: distinct positive whole token counts (none: the export says the card lists none)."""
    if value is None:
        return ()
    expected = "expected a list of distinct positive whole token counts such as [1024, 2048]"
    if not isinstance(value, list):
        raise ConfigError(f"{at}: longctx_eval.lengths: {expected}, got {short(value)}")
    for n in value:
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ConfigError(f"{at}: longctx_eval.lengths: {expected}, got {short(n)} in {short(value)}")
    if len(set(value)) != len(value):
        twice = next(n for n in value if value.count(n) > 1)
        raise ConfigError(f"{at}: longctx_eval.lengths: {expected}, got {twice} twice")
    return tuple(value)


def _seed(value: Any, at: str) -> int:
    """`longctx_eval.seed`: an integer (the build's --seed)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{at}: longctx_eval.seed: expected an integer (the build's --seed), got {short(value)}")
    return value


def _tokenizer_name(value: Any, at: str) -> str:
    """`longctx_eval.tokenizer.name` ("" when the card names none)."""
    if value is None:
        return ""
    name = value.get("name", "") if isinstance(value, dict) else None
    if not isinstance(name, str):
        raise ConfigError(f"{at}: longctx_eval.tokenizer: expected a mapping with a string `name`, got {short(value)}")
    return name


def _data_files(configs: Any, folder: Path, at: str) -> dict[str, tuple[str, ...]]:
    """Config name -> its data files (`configs[].data_files[].path`: a path or a list of paths), each a file
    path relative to the dataset folder that stays inside it."""
    entry_form = "{config_name: NAME, data_files: [{split: test, path: PATH}]}"
    expected = f"expected a list of {entry_form}"
    if configs is None:
        return {}
    if not isinstance(configs, list):
        raise ConfigError(f"{at}: configs: {expected}, got {short(configs)}")
    root = folder.resolve()
    files: dict[str, tuple[str, ...]] = {}
    for n, entry in enumerate(configs):
        name = entry.get("config_name") if isinstance(entry, dict) else None
        given = entry.get("data_files") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(given or [], list):
            raise ConfigError(f"{at}: configs[{n}]: expected {entry_form}, got {short(entry)}")
        paths: list[str] = []
        for f in given or []:
            path = f.get("path") if isinstance(f, dict) else None
            listed = [path] if isinstance(path, str) else path
            if not isinstance(listed, list) or not all(isinstance(p, str) and p for p in listed):
                raise ConfigError(
                    f"{at}: configs[{n}] ({name}): data_files: expected entries {{split: test, path: PATH}} with PATH "
                    f"a relative path or a list of them, got {short(f)}"
                )
            for p in listed:
                if "\0" in p or not (root / p).resolve().is_relative_to(root):
                    raise ConfigError(
                        f"{at}: configs[{n}] ({name}): data file {short(p)} is outside the dataset folder {root}; "
                        "expected a path inside it such as data/needle_1024.parquet"
                    )
            paths.extend(listed)
        files[name] = tuple(paths)
    return files
