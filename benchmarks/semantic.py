"""Semantic chunking: ours (batched MiniLM, one embedding per sentence) vs chonkie SemanticChunker, on a slice."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.chunking import MAX_TOKENS, OVERLAP, Spans

CHONKIE_THRESHOLD = 0.5  # the setting measured in offline-assets.md Part B


def slice_text(text: str, fraction: float) -> str:
    """The document's prefix of about `fraction` of its characters, cut at a paragraph break."""
    if fraction >= 1:
        return text
    cut = text.rfind("\n\n", 0, int(len(text) * fraction))
    return text[: cut if cut > 0 else int(len(text) * fraction)]


def minilm_embed(precision: str = "fast") -> tuple[Callable[[list[str]], Any], str]:
    """The project's MiniLM sentence embedder (window 0: the caller smooths) at `precision`; and its label."""
    from longctx_eval.models.semantic_embed import minilm_embedder

    embed = minilm_embedder(window=0, precision=precision)
    label = f"minilm_embedder(precision={precision!r}): {getattr(embed, 'dtype', '?')}"
    return embed, label


def ours(precision: str = "fast", vectors: dict[str, np.ndarray] | None = None) -> tuple[Callable[[str], Spans], str]:
    """chunk_document in semantic mode: 512/64 GPT-2 tokens, breakpoints where adjacent sentences drift.

    The embedder runs with window 0 and the window of 1 (its default) is applied here with the same
    `smooth`, so the raw sentence vectors can be kept in `vectors` for the fast-vs-exact comparison.
    """
    from benchmarks.gpt2 import gpt2_tiktoken_tokenizer
    from longctx_eval.models.semantic_embed import smooth
    from longctx_eval.text import ChunkConfig, chunk_document

    raw, embedder = minilm_embed(precision)
    tokenizer = gpt2_tiktoken_tokenizer()
    config = ChunkConfig(max_tokens=MAX_TOKENS, overlap=OVERLAP, semantic=True)

    def embed(texts: list[str]) -> np.ndarray:
        rows = raw(texts)
        if vectors is not None:
            vectors.update(zip(texts, rows, strict=True))
        return smooth(rows, 1)

    def run(text: str) -> Spans:
        chunks = chunk_document(text, tokenizer, config, embed=embed)
        return Spans([c.text for c in chunks], [c.char_start for c in chunks], [c.char_end for c in chunks])

    return run, embedder


def chonkie() -> tuple[Callable[[str], Spans], str]:
    """chonkie SemanticChunker with the same MiniLM (it counts its budget in MiniLM's own BERT tokens)."""
    from chonkie import SemanticChunker
    from chonkie.embeddings import SentenceTransformerEmbeddings
    from sentence_transformers import SentenceTransformer

    from longctx_eval.models.assets import minilm_path

    model = SentenceTransformer(str(minilm_path()), device="cpu")
    chunker = SemanticChunker(
        embedding_model=SentenceTransformerEmbeddings(model), threshold=CHONKIE_THRESHOLD, chunk_size=MAX_TOKENS
    )

    def run(text: str) -> Spans:
        chunks = chunker.chunk(text)
        return Spans([c.text for c in chunks], [c.start_index for c in chunks], [c.end_index for c in chunks])

    return run, "chonkie SentenceTransformerEmbeddings(MiniLM)"


def semantic_job(params: dict[str, Any]) -> dict[str, Any]:
    """Chunk a slice of the document semantically with one method; time it and check its offsets.

    `threads` sets torch's thread count for every method alike; `vectors_out` (ours) saves the sentence
    vectors there (.npz, after the timing) for `compare_precisions`.
    """
    import torch

    from benchmarks.gpt2 import tiktoken_r50k

    if params.get("threads"):
        torch.set_num_threads(int(params["threads"]))
    text = slice_text(Path(params["text"]).read_bytes().decode("utf-8"), params["fraction"])
    vectors: dict[str, np.ndarray] = {}
    started = time.perf_counter()
    if params["method"] == "chonkie":
        run, embedder = chonkie()
    else:
        run, embedder = ours(params.get("precision", "fast"), vectors)
    setup_s = time.perf_counter() - started
    started = time.perf_counter()
    spans = run(text)
    run_s = time.perf_counter() - started
    n_tokens = len(tiktoken_r50k().encode_ordinary(text))
    exact = all(text[s:e] == t for t, s, e in zip(spans.texts, spans.starts, spans.ends, strict=True))
    if params.get("vectors_out") and vectors:
        np.savez(params["vectors_out"], texts=np.array(list(vectors)), vectors=np.stack(list(vectors.values())))
    return {
        "embedder": embedder,
        "torch_threads": torch.get_num_threads(),
        "fraction": params["fraction"],
        "chars": len(text),
        "tokens": n_tokens,
        "setup_s": setup_s,
        "run_s": run_s,
        "tokens_per_s": n_tokens / run_s,
        "chunks": len(spans.texts),
        "spans": [[s, e] for s, e in zip(spans.starts, spans.ends, strict=True)],
        "offsets_exact": exact and bool(spans.texts),
    }


def compare_precisions(fast: dict[str, Any], exact: dict[str, Any], fast_npz: Path, exact_npz: Path) -> dict[str, Any]:
    """Fast vs exact on the same slice: cosine of each sentence's vectors, and the share of identical chunks."""
    a, b = np.load(fast_npz), np.load(exact_npz)
    by_text = dict(zip(b["texts"].tolist(), b["vectors"], strict=True))
    if set(by_text) != set(a["texts"].tolist()):
        return {"error": "the two runs embedded different sentences"}
    cos = np.array([float(np.dot(v, by_text[t])) for t, v in zip(a["texts"].tolist(), a["vectors"], strict=True)])
    fs, es = {tuple(x) for x in fast["spans"]}, {tuple(x) for x in exact["spans"]}
    return {
        "sentences": len(cos),
        "cosine_min": round(float(cos.min()), 6),
        "cosine_mean": round(float(cos.mean()), 6),
        "chunks_fast": len(fs),
        "chunks_exact": len(es),
        "identical_chunk_share": round(len(fs & es) / max(len(fs), len(es)), 4),
    }
