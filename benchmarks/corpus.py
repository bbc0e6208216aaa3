"""The benchmark document: real prose (the `austen` source when present, else `synthetic`) cut to N GPT-2 tokens."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.gpt2 import gpt2_tiktoken_tokenizer, gpt2_tokenizer
from data_builders import assemble, get_source
from longctx_eval import LongctxError

PREFERRED_SOURCES = ("austen", "synthetic")


@dataclass(frozen=True)
class Corpus:
    """The document every method chunks, and where it came from."""

    path: str
    source: str
    source_sha256: str
    seed: int
    tokens: int  # GPT-2 tokens, exact
    chars: int
    sha256: str
    backends_agree: bool  # GPT-2 via tiktoken and via HF tokenizers: the same ids and offsets on this text
    fallback_reason: str | None  # why the preferred real-prose source was not used, if it was not


def pick_source(requested: str | None) -> tuple[str, str | None]:
    """The source spec to use, and why the preferred one was skipped (None if it was not)."""
    if requested:
        return requested, None
    try:
        get_source(PREFERRED_SOURCES[0])
        return PREFERRED_SOURCES[0], None
    except LongctxError as exc:  # not registered yet, or its Debian packages cannot be fetched here
        return PREFERRED_SOURCES[1], f"{PREFERRED_SOURCES[0]!r} unavailable: {str(exc).splitlines()[0]}"


def prepare(folder: Path, tokens: int, seed: int, requested: str | None) -> Corpus:
    """Write the document to `folder` (reused when source, length and seed match) and describe it."""
    spec, reason = pick_source(requested)
    source = get_source(spec)
    stem = f"{spec.replace(':', '_').replace('/', '_')}-{tokens}-{seed}-{source.sha256[:12]}"
    meta_path, text_path = folder / f"{stem}.json", folder / f"{stem}.txt"
    if meta_path.is_file() and text_path.is_file():
        return Corpus(**{**json.loads(meta_path.read_text()), "fallback_reason": reason})
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    text = assemble(source, gpt2_tiktoken_tokenizer(), tokens, seed)
    print(f"  assembled {tokens:,} tokens from {spec!r} in {time.perf_counter() - started:.1f} s", flush=True)
    text_path.write_bytes(text.encode("utf-8"))  # bytes: no newline translation
    corpus = Corpus(
        path=str(text_path),
        source=spec,
        source_sha256=source.sha256,
        seed=seed,
        tokens=tokens,
        chars=len(text),
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        backends_agree=gpt2_tiktoken_tokenizer().encode(text) == gpt2_tokenizer().encode(text),
        fallback_reason=reason,
    )
    meta_path.write_text(json.dumps({**asdict(corpus), "fallback_reason": None}, indent=1))
    return corpus


def read_text(corpus: Corpus) -> str:
    """The document's text (newlines kept exactly as written)."""
    return Path(corpus.path).read_bytes().decode("utf-8")
