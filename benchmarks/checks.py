"""Correctness of a method's output on the document: offsets, budget, overlap, coverage (never timed)."""

from __future__ import annotations

import random
import statistics
from typing import Any

import numpy as np

from benchmarks.chunking import MAX_TOKENS, OVERLAP, Spans


def check(text: str, spans: Spans, encode_batch: Any, budget: int = MAX_TOKENS, overlap: int = OVERLAP) -> dict:
    """Chunk statistics, re-tokenized in place with `encode_batch` (tiktoken r50k_base), and offset checks."""
    n = len(spans.texts)
    exact = [
        0 <= s <= e <= len(text) and text[s:e] == t
        for t, s, e in zip(spans.texts, spans.starts, spans.ends, strict=True)
    ]
    true_starts = _true_starts(text, spans, exact)
    verbatim = [s >= 0 for s in true_starts]
    lengths = [len(ids) for ids in encode_batch(spans.texts)]
    located = [(s, s + len(t)) for s, t in zip(true_starts, spans.texts, strict=True) if s >= 0]
    overlaps = _overlap_tokens(text, located, encode_batch)
    return {
        "chunks": n,
        "offsets_exact": all(exact) and n > 0,
        "offsets_wrong": n - sum(exact),
        "offsets_wrong_examples": [
            {"chunk": i, "reported_start": spans.starts[i], "true_start": true_starts[i]}
            for i in [i for i, ok in enumerate(exact) if not ok][:3]
        ],
        "chunks_verbatim": sum(verbatim),  # chunk text found in the document (at its true place)
        "tokens_max": max(lengths, default=0),
        "tokens_median": statistics.median(lengths) if lengths else 0,
        "chunks_over_budget": sum(n_tok > budget for n_tok in lengths),
        "overlap_tokens_min_median_max": _min_median_max(overlaps),
        "overlaps_over_configured": sum(o > overlap for o in overlaps),
        "uncovered_nonspace_chars": _uncovered(text, located),
    }


def _true_starts(text: str, spans: Spans, exact: list[bool]) -> list[int]:
    """Where each chunk really is: its reported start when right, else found after the previous one (-1: nowhere)."""
    out: list[int] = []
    previous = -1
    for t, s, ok in zip(spans.texts, spans.starts, exact, strict=True):
        found = s if ok else text.find(t, previous + 1)
        out.append(found)
        previous = found if found >= 0 else previous
    return out


def _overlap_tokens(text: str, located: list[tuple[int, int]], encode_batch: Any) -> list[int]:
    shared = [text[s:pe] for (_, pe), (s, _) in zip(located, located[1:], strict=False)]
    return [len(ids) if piece else 0 for piece, ids in zip(shared, encode_batch(shared), strict=True)]


def _uncovered(text: str, located: list[tuple[int, int]]) -> int:
    depth = np.zeros(len(text) + 1, dtype=np.int32)
    np.add.at(depth, [s for s, _ in located], 1)
    np.add.at(depth, [e for _, e in located], -1)
    covered = np.cumsum(depth[:-1]) > 0
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    spaces = [ord(ch) for ch in set(text) if ch.isspace()]
    return int(np.count_nonzero(~covered & ~np.isin(codes, spaces)))


def _min_median_max(values: list[int]) -> list[float]:
    return [min(values), statistics.median(values), max(values)] if values else []


def check_token_offsets(
    text: str, spans: Spans, global_offsets: list[tuple[int, int]], budget: int = MAX_TOKENS
) -> dict:
    """Ours only: token spans index the whole document's tokenization exactly, and tile it without gaps."""
    assert spans.token_spans is not None
    n_tokens = len(global_offsets)
    problems: list[str] = []
    prev_end = 0
    for i, ((ts, te), cs, ce) in enumerate(zip(spans.token_spans, spans.starts, spans.ends, strict=True)):
        if not (0 <= ts < te <= n_tokens) or te - ts > budget:
            problems.append(f"chunk {i}: token span [{ts}, {te}) invalid or over budget")
        elif ts > prev_end:
            problems.append(f"chunk {i}: token gap [{prev_end}, {ts})")
        else:
            lo, hi = global_offsets[ts][0], global_offsets[te - 1][1]
            # The tokens lie inside the chunk, and anything of the chunk outside them is whitespace.
            if not (cs <= lo and hi <= ce and not text[cs:lo].strip() and not text[hi:ce].strip()):
                problems.append(f"chunk {i}: tokens [{ts}, {te}) span chars [{lo}, {hi}), chunk is [{cs}, {ce})")
        prev_end = max(prev_end, te)
    if prev_end != n_tokens:
        problems.append(f"tokens end at {prev_end}, document has {n_tokens}")
    return {"token_offsets_exact": not problems, "token_offset_problems": problems[:5]}


def check_index(text: str, index: Any, n_spans: int = 2_000, seed: int = 0) -> dict:
    """Ours only: random needle-sized spans map to covering chunks and back to the same global offsets."""
    rng = random.Random(seed)
    failures = 0
    for _ in range(n_spans):
        start = rng.randrange(0, max(1, len(text) - 80))
        end = start + rng.randrange(1, 80)
        partly = index.covering(start, end, fully=False)
        ok = bool(partly)
        for c in index.covering(start, end):
            local = index.to_local_char(c, start)
            ok &= (
                index.to_global_char(c, local) == start
                and index.chunks[c].text[local : local + end - start] == text[start:end]
            )
        failures += not ok
    return {"index_roundtrip_spans": n_spans, "index_roundtrip_failures": failures}
