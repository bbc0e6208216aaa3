"""Haystack sources at benchmark size: the synthetic narrative against two references, each in a fresh process.

`synthetic`: our generated narrative (`narrative_paragraphs`) until the document's length in characters.
`austen_warm`: the real-prose source's warm path (`ensure_corpus` verifies the cached 5 MB corpus by hash, then
its paragraphs are read). `word_salad`: the cheapest possible generator (stdlib random words), a floor.
"""

from __future__ import annotations

import random
import time
from typing import Any

SOURCES = ("synthetic", "austen_warm", "word_salad")


def _synthetic(chars: int, seed: int) -> int:
    from data_builders import narrative_paragraphs

    n = 0
    for para in narrative_paragraphs(seed):
        n += len(para) + 2
        if n >= chars:
            break
    return n


def _austen_warm(chars: int, seed: int) -> int:
    from data_builders.haystack.sources import austen

    path, cached = austen.ensure_corpus(download=False)
    if not cached:
        raise SystemExit("the austen corpus was not cached before the timed call")
    return len(path.read_bytes().decode("utf-8"))


def _word_salad(chars: int, seed: int) -> int:
    rng = random.Random(seed)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(5000)]
    n, out = 0, []
    while n < chars:
        sentence = " ".join(rng.choices(vocab, k=rng.randint(6, 20))).capitalize() + ". "
        out.append(sentence)
        n += len(sentence)
    return len("".join(out))


def sources_job(params: dict[str, Any]) -> dict[str, Any]:
    """Produce about `chars` characters of haystack text with one source; warm-up (imports) is not timed."""
    run = {"synthetic": _synthetic, "austen_warm": _austen_warm, "word_salad": _word_salad}[params["source"]]
    if params["source"] == "austen_warm":
        from data_builders.haystack.sources import austen

        austen.ensure_corpus()  # builds the cache if needed, untimed: the timed call is the warm path
    started = time.perf_counter()
    chars = run(params["chars"], params["seed"])
    return {"run_s": time.perf_counter() - started, "chars": chars}


def sources_table(result: dict[str, Any]) -> str:
    """Markdown: seconds per source, and the synthetic narrative's time as a multiple of each reference's."""
    head = "| source | seconds | chars | MB/s | synthetic ÷ source | peak MiB |\n|---|---|---|---|---|---|\n"
    ours = result.get("synthetic", {}).get("run_s")
    rows = []
    for name in SOURCES:
        r = result.get(name, {})
        if "error" in r or "run_s" not in r:
            rows.append(f"| {name} | not measured: {r.get('error', 'not run')} | | | | |")
            continue
        ratio = f"{ours / r['run_s']:.2f}" if ours and r["run_s"] > 0 else ""
        rows.append(
            f"| {name} | {r['run_s']:.2f} | {r['chars']:,} | {r['chars'] / r['run_s'] / 1e6:.1f} | {ratio} "
            f"| {r['peak_rss_mib']:.0f} |"
        )
    return head + "\n".join(rows) + "\n"
