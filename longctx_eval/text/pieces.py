"""Token offsets, token counts and sentence spans of a long text, computed paragraph by paragraph and memoised.

Documents that share a haystack (the needle family: one haystack, a needle at many depths) share almost every
paragraph, so tokenizing and sentence-splitting a 1M-token document again for each of them (about 8 s on two
cores) would cost more than embedding the few chunks that changed. Here a text is cut after each paragraph
break (a blank line or U+2029, the hard boundaries `split_sentences` already has) and each distinct paragraph
is processed once per process; the results are the whole text's, exactly:

- **sentences**: a paragraph break is always a sentence cut, and Punkt decides a boundary from the tokens
  beside it, so the sentences of a text are the sentences of its paragraphs (`split_sentences` on each,
  shifted). Checked on whole documents of 1M tokens (austen, two seeds, and the synthetic narrative: 37-65K
  sentences each, identical) and in the tests.
- **tokens**: only for tokenizers whose every stage is local and never crosses whitespace (`separable`:
  WordPiece over a BERT or whitespace pre-tokenizer, char-local normalizers, no added token containing
  whitespace: MiniLM's); a cut inside whitespace then splits no token and the offsets are the whole text's.
  Any other tokenizer encodes the whole text, as before.

Memory is bounded (`MEMO_BYTES`, least recently used paragraphs dropped first).
"""

from __future__ import annotations

import functools
import itertools
import json
from collections import OrderedDict
from typing import Any, NamedTuple

import numpy as np

from longctx_eval.text.sentences import _PARAGRAPH_BREAK, split_sentences

MEMO_BYTES = 256 << 20
"""Per memo (tokens per tokenizer, sentences per language): about 20 distinct 1M-token haystacks."""
MIN_CHARS = 20_000
"""Shorter texts are processed whole (nothing to gain); the results are the same either way."""

_SEPARABLE_NORMALIZERS = {"BertNormalizer", "Lowercase", "NFD", "NFKD", "NFC", "NFKC", "StripAccents"}
_SEPARABLE_PRE_TOKENIZERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}


class _Memo:
    """An LRU dict bounded in (approximate) bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._held = 0

    def get(self, key: str) -> Any:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: str, value: Any, size: int) -> None:
        size += len(key)
        old = self._items.pop(key, None)
        if old is not None:
            self._held -= old[1]
        self._items[key] = (value, size)
        self._held += size
        while self._held > self.budget and self._items:
            _, (_, dropped) = self._items.popitem(last=False)
            self._held -= dropped


def paragraph_cuts(text: str) -> list[int]:
    """0, the end of every paragraph break, len(text): the pieces are text[cuts[i]:cuts[i + 1]]."""
    cuts = [0, *(m.end() for m in _PARAGRAPH_BREAK.finditer(text))]
    if cuts[-1] != len(text):
        cuts.append(len(text))
    return cuts


def _types(component: Any) -> list[str]:
    if component is None:
        return []
    if component.get("type") == "Sequence":
        inner = component.get("normalizers") or component.get("pretokenizers") or []
        return [t for c in inner for t in _types(c)]
    return [str(component.get("type"))]


def separable(tokenizer: Any) -> bool:
    """Whether `tokenizer` (a `text.Tokenizer`) tokenizes a text as the concatenation of its paragraphs."""
    backend = getattr(tokenizer, "backend", None)
    if backend is None or not hasattr(tokenizer, "offset_arrays"):
        return False
    return _separable_json(backend.to_str())


@functools.lru_cache(maxsize=16)
def _separable_json(serialized: str) -> bool:
    spec = json.loads(serialized)
    model = spec.get("model") or {}
    pre = _types(spec.get("pre_tokenizer"))
    norm = _types(spec.get("normalizer"))
    added = spec.get("added_tokens") or []
    return (
        model.get("type") == "WordPiece"
        and bool(pre)
        and all(t in _SEPARABLE_PRE_TOKENIZERS for t in pre)
        and all(t in _SEPARABLE_NORMALIZERS for t in norm)
        and all(not any(ch.isspace() for ch in str(a.get("content", ""))) for a in added)
    )


def _token_memo(tokenizer: Any) -> _Memo | None:
    """The tokenizer's memo, or None where it is not separable (decided once per tokenizer object: serializing a
    large tokenizer to decide costs more than encoding a short text)."""
    memo: _Memo | bool | None = getattr(tokenizer, "_piece_memo", None)
    if memo is None:
        memo = _Memo(MEMO_BYTES) if separable(tokenizer) else False
        tokenizer._piece_memo = memo
    return memo if isinstance(memo, _Memo) else None


class TokenOffsets(NamedTuple):
    """Start and end character offsets of every token of a text (int64 arrays); `len(starts)` is its token count."""

    starts: np.ndarray
    ends: np.ndarray


def token_offsets(tokenizer: Any, text: str) -> TokenOffsets:
    """Start and end character offsets of every token of `text` (int64), as `tokenizer.offset_arrays` gives."""
    memo = _token_memo(tokenizer) if len(text) >= MIN_CHARS else None
    if memo is None:
        starts, ends = tokenizer.offset_arrays(text)
        return TokenOffsets(np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))
    cuts = paragraph_cuts(text)
    pieces = [text[lo:hi] for lo, hi in zip(cuts, cuts[1:], strict=False)]
    found = [memo.get(piece) for piece in pieces]
    missing = list(dict.fromkeys(piece for piece, got in zip(pieces, found, strict=True) if got is None))
    new: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for piece, encoded in zip(missing, _encode_many(tokenizer, missing), strict=True):
        new[piece] = encoded
        memo.put(piece, encoded, encoded[0].nbytes + encoded[1].nbytes)
    all_starts, all_ends, shifts = [], [], cuts[: len(pieces)]
    for piece, got in zip(pieces, found, strict=True):
        offsets = got if got is not None else new[piece]
        all_starts.append(offsets[0])
        all_ends.append(offsets[1])
    if not all_starts:
        return TokenOffsets(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    # Each piece's offsets shifted by where it starts: one concatenation and one addition for all of them.
    shift = np.repeat(np.asarray(shifts, dtype=np.int64), [len(a) for a in all_starts])
    starts = np.concatenate(all_starts).astype(np.int64) + shift
    return TokenOffsets(starts, np.concatenate(all_ends).astype(np.int64) + shift)


def _encode_many(tokenizer: Any, pieces: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Token offsets (int32 starts, ends) of each piece: one batch call to the Rust backend (the same encodings)."""
    out = []
    for enc in tokenizer.backend.encode_batch(pieces, add_special_tokens=False) if pieces else []:
        flat = np.fromiter(itertools.chain.from_iterable(enc.offsets), dtype=np.int64, count=2 * len(enc.offsets))
        out.append((flat[0::2].astype(np.int32), flat[1::2].astype(np.int32)))
    return out


def token_count(tokenizer: Any, text: str) -> int:
    """The number of tokens of `text` (`tokenizer.count`), from the paragraph memo where it applies."""
    if len(text) < MIN_CHARS or _token_memo(tokenizer) is None:
        return tokenizer.count(text)
    return len(token_offsets(tokenizer, text)[0])


_SENTENCE_MEMOS: dict[str, _Memo] = {}


def sentence_spans(text: str, language: str = "english") -> list[tuple[int, int]]:
    """`split_sentences(text, language)`, paragraph by paragraph from the memo (the same spans)."""
    if len(text) < MIN_CHARS:
        return split_sentences(text, language)
    memo = _SENTENCE_MEMOS.setdefault(language, _Memo(MEMO_BYTES))
    cuts = paragraph_cuts(text)
    out: list[tuple[int, int]] = []
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        piece = text[lo:hi]
        got = memo.get(piece)
        if got is None:
            got = np.asarray(split_sentences(piece, language), dtype=np.int32).reshape(-1, 2)
            memo.put(piece, got, got.nbytes + 64)
        out.extend((int(s) + lo, int(e) + lo) for s, e in got.tolist())
    return out
