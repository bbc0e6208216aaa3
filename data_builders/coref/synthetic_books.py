"""Book-format JSONL (BookCoref's layout) written from the seeded synthetic narrative, its person chains as gold.

For trying `coref_book` without BookCoref and for its tests: each book is `synthetic_document` at a number of
words, written as BookCoref's loader writes a book (`doc_key`, `sentences`, `clusters` of inclusive word spans,
`characters` with a name and cluster each), or cut into 1,500-word windows as its `split` layout is.

    python -m data_builders.coref.synthetic_books OUT.jsonl --words 40000,120000,250000 [--seed 0] [--split]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from data_builders.coref.synthetic import synthetic_document
from longctx_eval.atomic_io import atomic_write_text
from longctx_eval.errors import ConfigError, LongctxError

SPLIT_WORDS = 1500  # BookCoref's split layout: windows of 1,500 words


def synthetic_book(words: int, seed: int, key: str = "") -> dict[str, Any]:
    """One book of at most `words` words as a BookCoref record (full layout)."""
    key = key or f"synthetic_book_{words}_{seed}"
    doc = synthetic_document(words, seed, None, name=key).doc
    sentences, start = [], 0
    for end in doc.sentence_ends:
        if end > start:
            sentences.append(list(doc.tokens[start:end]))
        start = end
    clusters = [[[s, e] for s, e in c] for c in doc.clusters]
    characters = [{"name": " ".join(doc.tokens[c[0][0] : c[0][1] + 1]), "cluster": c} for c in clusters]
    return {"doc_key": key, "gutenberg_key": "synthetic", "sentences": sentences, "clusters": clusters,
            "characters": characters}  # fmt: skip


def split_record(record: dict[str, Any], size: int = SPLIT_WORDS) -> list[dict[str, Any]]:
    """A full-layout record cut at sentence ends into windows of at most `size` words, keyed as BookCoref's split."""
    windows: list[list[list[str]]] = [[]]
    for sentence in record["sentences"]:
        if windows[-1] and sum(map(len, windows[-1])) + len(sentence) > size:
            windows.append([])
        windows[-1].append(sentence)
    out, start = [], 0
    for k, sentences in enumerate(windows):
        end = start + sum(map(len, sentences))
        clusters = []
        for c in record["clusters"]:
            inside = [[s - start, e - start] for s, e in c if s >= start and e < end]
            if inside:
                clusters.append(inside)
        out.append({"doc_key": f"{record['doc_key']}_split{size}_S{k}", "sentences": sentences, "clusters": clusters,
                    "characters": {str(i): c for i, c in enumerate(clusters)}})  # fmt: skip
        start = end
    return out


def write_books(path: Path, words: Sequence[int], seed: int = 0, split: bool = False) -> list[dict[str, Any]]:
    """Write one synthetic book per entry of `words` (seeds seed, seed+1, ...) to `path`; returns the records."""
    books = [synthetic_book(n, seed + i) for i, n in enumerate(words)]
    records = [r for b in books for r in split_record(b)] if split else books
    atomic_write_text(path, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return records


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: write synthetic books; bad input is one line on stderr and exit status 2."""
    parser = argparse.ArgumentParser(prog="python -m data_builders.coref.synthetic_books", description=__doc__)
    parser.add_argument("out", type=Path, help="the JSONL file to write")
    parser.add_argument("--words", default="40000,120000,250000", help="words per book, comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", action="store_true", help="write the split layout (1,500-word windows)")
    args = parser.parse_args(argv)
    try:
        words = [int(w) for w in args.words.split(",")]
        if not words or min(words) < 16:
            raise ValueError
    except ValueError:
        print(f"--words: expected comma-separated word counts >= 16, got {args.words!r}", file=sys.stderr)
        return 2
    try:
        records = write_books(args.out, words, args.seed, args.split)
    except (ConfigError, LongctxError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"{args.out}: {len(records)} records, {sum(sum(map(len, r['sentences'])) for r in records):,} words")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
