"""`longctx-eval chunk`: a UTF-8 file in, one JSON line per chunk out, streamed, with the exact offset index."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from longctx_eval.errors import DataError, PrerequisiteError
from longctx_eval.text.chunking import Chunk, Embed

FIELDS = ("index", "text", "char_start", "char_end", "token_start", "token_end", "overlap_chars", "overlap_tokens")


def read_text_file(path: Path) -> str:
    """The file decoded as strict UTF-8 (a BOM kept as U+FEFF, CRLF kept), so offsets index its exact text."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file; expected a UTF-8 text file") from None
    except IsADirectoryError:
        raise DataError(f"{path} is a folder; expected a UTF-8 text file") from None
    except OSError as exc:
        raise DataError(f"{path} cannot be read: {exc.strerror}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset {exc.start} ({exc.reason}); "
            "expected UTF-8 (convert it first, e.g. iconv -f LATIN1 -t UTF-8)"
        ) from None


def chunk_line(chunk: Chunk) -> bytes:
    """One chunk as a UTF-8 JSON line with the fields of `FIELDS`."""
    record = {name: getattr(chunk, name) for name in FIELDS}
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def write_lines(chunks: Iterable[Chunk], out: BinaryIO, *, flush: bool = False) -> int:
    """Write each chunk as soon as it is made (flushing each line if asked); returns the number written."""
    n = 0
    for chunk in chunks:
        out.write(chunk_line(chunk))
        if flush:
            out.flush()
        n += 1
    return n


def semantic_embedder() -> Embed:
    """The packaged MiniLM sentence embedder (`text.semantic_embed.minilm_embedder`), imported only when asked."""
    try:
        from longctx_eval.text.semantic_embed import minilm_embedder
    except ModuleNotFoundError as exc:
        raise PrerequisiteError(
            f"--semantic needs the sentence embedder, but module {exc.name!r} is missing; "
            "expected longctx_eval.text.semantic_embed and sentence-transformers (pip install -e .)"
        ) from exc
    return minilm_embedder()
