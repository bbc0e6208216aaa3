"""`longctx-eval chunk`: a UTF-8 file in, one JSON line per chunk out, streamed, with the exact offset index."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from longctx_eval.errors import ConfigError, DataError, PrerequisiteError
from longctx_eval.progress import console
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
        from longctx_eval.models.semantic_embed import minilm_embedder
    except ModuleNotFoundError as exc:
        raise PrerequisiteError(
            f"--semantic needs the sentence embedder, but module {exc.name!r} is missing; "
            "expected longctx_eval.models.semantic_embed and sentence-transformers (pip install -e .)"
        ) from exc
    return minilm_embedder()


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `chunk`."""
    chunk = sub.add_parser("chunk", help="chunk a UTF-8 file; one JSON line per chunk with exact offsets")
    chunk.add_argument("file", type=Path, help="UTF-8 text; offsets index its exact text (a BOM and CRLF kept)")
    chunk.add_argument("--tokenizer", required=True, help="'minilm', 'smollm2-135m', a tokenizer.json, or hub id")
    chunk.add_argument("--max-tokens", type=int, default=512, help="token budget per chunk (default 512)")
    chunk.add_argument("--overlap", type=int, default=64, help="tokens shared with the previous chunk (default 64)")
    chunk.add_argument("--semantic", action="store_true", help="also cut at topic shifts (packaged MiniLM)")
    chunk.add_argument("--breakpoint-percentile", type=float, default=95.0, help="semantic: cut above this")
    chunk.add_argument("--language", default="english", help="Punkt sentence model (default english)")
    chunk.add_argument(
        "--resync",
        action="store_true",
        help="boundaries that fall back into step after an insertion (content-chosen sync sentences)",
    )
    chunk.add_argument(
        "--sync-tokens", type=int, default=None, help="--resync: mean tokens between sync sentences (8 budgets)"
    )
    chunk.add_argument("--out", type=Path, default=None, help="write here (atomically) instead of stdout")
    chunk.set_defaults(func=cmd_chunk)


def cmd_chunk(args: argparse.Namespace) -> int:
    """Chunk one file and stream its chunks as JSON lines to stdout or --out."""
    from longctx_eval.atomic_io import atomic_output
    from longctx_eval.models.assets import load_tokenizer
    from longctx_eval.text.chunking import ChunkConfig, iter_chunks

    if args.max_tokens < 1:
        raise ConfigError(f"--max-tokens {args.max_tokens}: expected a positive number of tokens")
    if not 0 <= args.overlap < args.max_tokens:
        raise ConfigError(f"--overlap {args.overlap}: expected 0 <= overlap < --max-tokens ({args.max_tokens})")
    text = read_text_file(args.file)
    config = ChunkConfig(
        max_tokens=args.max_tokens,
        overlap=args.overlap,
        semantic=args.semantic,
        breakpoint_percentile=args.breakpoint_percentile,
        language=args.language,
        resync=args.resync,
        sync_tokens=args.sync_tokens,
    )
    tokenizer = load_tokenizer(args.tokenizer)
    chunks = iter_chunks(text, tokenizer, config, embed=semantic_embedder() if args.semantic else None)
    if args.out is None:
        try:
            write_lines(chunks, sys.stdout.buffer, flush=True)
        except BrokenPipeError:  # `| head`: the reader has all it wants
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 0
    with atomic_output(args.out) as fh:
        n = write_lines(chunks, fh)
    console.print(f"wrote {n} chunks of {args.file} to {args.out}", highlight=False, markup=False)
    return 0
