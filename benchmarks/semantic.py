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


def minilm_embed() -> tuple[Callable[[list[str]], Any], str]:
    """The project's MiniLM sentence embedder if present, else a local batched one; and which was used."""
    try:
        from longctx_eval.text.semantic_embed import minilm_embedder

        return minilm_embedder(), "longctx_eval.text.semantic_embed.minilm_embedder() (defaults)"
    except ImportError:
        pass
    from sentence_transformers import SentenceTransformer

    from longctx_eval.assets import minilm_path

    model = SentenceTransformer(str(minilm_path()), device="cpu")

    def embed(texts: list[str]) -> np.ndarray:
        # encode() sorts by length inside, so batches pad little; normalised rows make cosine a dot product.
        return model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)

    return embed, "benchmarks.semantic (local: SentenceTransformer(minilm).encode, batch 64, length-sorted)"


def ours() -> tuple[Callable[[str], Spans], str]:
    """chunk_document in semantic mode: 512/64 GPT-2 tokens, breakpoints where adjacent sentences drift."""
    from benchmarks.gpt2 import gpt2_tiktoken_tokenizer
    from longctx_eval.text import ChunkConfig, chunk_document

    embed, embedder = minilm_embed()
    tokenizer = gpt2_tiktoken_tokenizer()
    config = ChunkConfig(max_tokens=MAX_TOKENS, overlap=OVERLAP, semantic=True)

    def run(text: str) -> Spans:
        chunks = chunk_document(text, tokenizer, config, embed=embed)
        return Spans([c.text for c in chunks], [c.char_start for c in chunks], [c.char_end for c in chunks])

    return run, embedder


def chonkie() -> tuple[Callable[[str], Spans], str]:
    """chonkie SemanticChunker with the same MiniLM (it counts its budget in MiniLM's own BERT tokens)."""
    from chonkie import SemanticChunker
    from chonkie.embeddings import SentenceTransformerEmbeddings
    from sentence_transformers import SentenceTransformer

    from longctx_eval.assets import minilm_path

    model = SentenceTransformer(str(minilm_path()), device="cpu")
    chunker = SemanticChunker(
        embedding_model=SentenceTransformerEmbeddings(model), threshold=CHONKIE_THRESHOLD, chunk_size=MAX_TOKENS
    )

    def run(text: str) -> Spans:
        chunks = chunker.chunk(text)
        return Spans([c.text for c in chunks], [c.start_index for c in chunks], [c.end_index for c in chunks])

    return run, "chonkie SentenceTransformerEmbeddings(MiniLM)"


def semantic_job(params: dict[str, Any]) -> dict[str, Any]:
    """Chunk a slice of the document semantically with one method; time it and check its offsets."""
    from benchmarks.gpt2 import tiktoken_r50k

    text = slice_text(Path(params["text"]).read_bytes().decode("utf-8"), params["fraction"])
    started = time.perf_counter()
    run, embedder = {"ours": ours, "chonkie": chonkie}[params["method"]]()
    setup_s = time.perf_counter() - started
    started = time.perf_counter()
    spans = run(text)
    run_s = time.perf_counter() - started
    n_tokens = len(tiktoken_r50k().encode_ordinary(text))
    exact = all(text[s:e] == t for t, s, e in zip(spans.texts, spans.starts, spans.ends, strict=True))
    return {
        "embedder": embedder,
        "fraction": params["fraction"],
        "chars": len(text),
        "tokens": n_tokens,
        "setup_s": setup_s,
        "run_s": run_s,
        "tokens_per_s": n_tokens / run_s,
        "chunks": len(spans.texts),
        "offsets_exact": exact and bool(spans.texts),
    }
