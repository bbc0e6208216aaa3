"""The overlap-offset index: chunk-local offsets to document offsets, and spans to the chunks holding them."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from longctx_eval.errors import DataError
from longctx_eval.text.chunking import Chunk


class OffsetIndex:
    """Exact maps between the chunks of one document and the document, in characters and in tokens."""

    def __init__(self, chunks: Sequence[Chunk], text_length: int, n_tokens: int) -> None:
        self.chunks = list(chunks)
        self.text_length = text_length
        self.n_tokens = n_tokens
        self._char_start = [c.char_start for c in self.chunks]
        self._char_end = [c.char_end for c in self.chunks]
        self._tok_start = [c.token_start for c in self.chunks]
        self._tok_end = [c.token_end for c in self.chunks]
        _check_sorted("char", self._char_start, self._char_end, text_length)
        _check_sorted("token", self._tok_start, self._tok_end, n_tokens)

    def __len__(self) -> int:
        return len(self.chunks)

    def to_global_char(self, chunk_index: int, local: int) -> int:
        """Document character offset of character offset `local` in chunk `chunk_index` (0..len inclusive)."""
        i = self._chunk(chunk_index)
        return self._char_start[i] + _local(local, self._char_end[i] - self._char_start[i], "character")

    def to_global_token(self, chunk_index: int, local: int) -> int:
        """Global token index of token `local` of chunk `chunk_index` (0..n inclusive, for span ends)."""
        i = self._chunk(chunk_index)
        return self._tok_start[i] + _local(local, self._tok_end[i] - self._tok_start[i], "token")

    def to_local_char(self, chunk_index: int, offset: int) -> int:
        """Character offset inside chunk `chunk_index` of document offset `offset` (which it must contain)."""
        i = self._chunk(chunk_index)
        if not self._char_start[i] <= offset <= self._char_end[i]:
            raise DataError(
                f"character offset {offset} is outside chunk {i}; expected "
                f"{self._char_start[i]} <= offset <= {self._char_end[i]}"
            )
        return offset - self._char_start[i]

    def covering(self, start: int, end: int, *, fully: bool = True) -> list[int]:
        """Chunks whose character span contains [start, end) (or, fully=False, overlaps it), in order."""
        _check_span(start, end, self.text_length, "character")
        return _covering(self._char_start, self._char_end, start, end, fully)

    def covering_tokens(self, start: int, end: int, *, fully: bool = True) -> list[int]:
        """Chunks whose token span contains [start, end) (or, fully=False, overlaps it), in order."""
        _check_span(start, end, self.n_tokens, "token")
        return _covering(self._tok_start, self._tok_end, start, end, fully)

    def _chunk(self, chunk_index: int) -> int:
        if not 0 <= chunk_index < len(self.chunks):
            raise DataError(f"chunk index {chunk_index} is out of range; expected 0 <= index < {len(self.chunks)}")
        return chunk_index


def _covering(starts: list[int], ends: list[int], start: int, end: int, fully: bool) -> list[int]:
    # Starts and ends are both sorted, so each condition holds on a prefix or a suffix of the chunks
    # and the answer is one contiguous range found with two bisects.
    if fully or start == end:
        # An empty span is "overlapped" by the chunks containing its position.
        lo, hi = bisect_left(ends, end), bisect_right(starts, start)
    else:
        lo, hi = bisect_right(ends, start), bisect_left(starts, end)
    return list(range(lo, hi))


def _local(local: int, size: int, unit: str) -> int:
    if not 0 <= local <= size:
        raise DataError(f"local {unit} offset {local} is out of range; expected 0 <= offset <= {size}")
    return local


def _check_span(start: int, end: int, limit: int, unit: str) -> None:
    if not 0 <= start <= end <= limit:
        raise DataError(f"{unit} span [{start}, {end}) is invalid; expected 0 <= start <= end <= {limit}")


def _check_sorted(unit: str, starts: list[int], ends: list[int], limit: int) -> None:
    # Bisect is only exact on sorted spans; chunks from `chunk_document` always are.
    for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
        if not 0 <= s <= e <= limit:
            raise DataError(f"chunk {i} has {unit} span [{s}, {e}); expected 0 <= start <= end <= {limit}")
        if i and (s < starts[i - 1] or e < ends[i - 1]):
            raise DataError(f"chunk {i} {unit} span [{s}, {e}) is out of order; expected chunks sorted by position")
