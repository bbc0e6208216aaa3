"""A tokenizer with exact character offsets, the one type every length and chunk is measured in."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from tokenizers import Tokenizer as _HFTokenizer

from longctx_eval.errors import PrerequisiteError


@dataclass(frozen=True)
class Encoded:
    """Token ids of a text and, per token, its half-open [start, end) character span in that text."""

    ids: list[int]
    offsets: list[tuple[int, int]]


class Tokenizer:
    """Wraps a `tokenizers.Tokenizer`: counting, encoding with offsets, decoding. No special tokens added."""

    def __init__(self, backend: _HFTokenizer, name: str) -> None:
        # A private copy with truncation and padding off: lengths must be measured, never capped, and a
        # transformers tokenizer sharing the backend re-sets both on every call.
        own = _HFTokenizer.from_str(backend.to_str())
        own.no_truncation()
        own.no_padding()
        self.backend = own
        self.name = name

    def encode(self, text: str) -> Encoded:
        """Encode `text` without special tokens; offsets index characters of `text`."""
        enc = self.backend.encode(text, add_special_tokens=False)
        return Encoded(ids=list(enc.ids), offsets=cast(list[tuple[int, int]], [tuple(o) for o in enc.offsets]))

    def offset_arrays(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """Token start and end character offsets of `text` as int64 arrays (what chunking a long document needs)."""
        offsets = self.backend.encode(text, add_special_tokens=False).offsets  # no per-token tuple copies
        flat = np.fromiter(itertools.chain.from_iterable(offsets), dtype=np.int64, count=2 * len(offsets))
        return flat[0::2], flat[1::2]

    def encode_batch(self, texts: list[str]) -> list[Encoded]:
        """Encode many texts at once (parallel in the Rust backend)."""
        encs = self.backend.encode_batch(texts, add_special_tokens=False)
        return [
            Encoded(ids=list(e.ids), offsets=cast(list[tuple[int, int]], [tuple(o) for o in e.offsets])) for e in encs
        ]

    def count(self, text: str) -> int:
        """Number of tokens of `text` without special tokens."""
        return len(self.backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        """Text of `ids` (lossy for normalizing tokenizers such as uncased WordPiece)."""
        return self.backend.decode(ids, skip_special_tokens=False)

    @property
    def sha256(self) -> str:
        """Hash of the serialized tokenizer, so datasets record exactly which tokenizer measured them."""
        return hashlib.sha256(self.backend.to_str().encode()).hexdigest()

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> Tokenizer:
        """Load a `tokenizer.json` file (or a folder holding one)."""
        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        if not p.is_file():
            raise PrerequisiteError(f"tokenizer file not found: {p} (expected a tokenizer.json or a folder with one)")
        return cls(_HFTokenizer.from_file(str(p)), name or str(path))

    @classmethod
    def from_transformers(cls, tok: Any, name: str) -> Tokenizer:
        """Wrap a transformers fast tokenizer (anything with a `backend_tokenizer`)."""
        backend = getattr(tok, "backend_tokenizer", None)
        if backend is None:
            raise PrerequisiteError(f"tokenizer {name!r} is not a fast tokenizer; offsets need one")
        return cls(backend, name)
