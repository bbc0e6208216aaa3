"""Batched greedy generation on CPU: samples/s of an `hf:` model at ~1K and ~4K-token needle prompts, batch 1/2/4.

    python -m benchmarks.batching [--model smollm2-135m] [--lengths 1024,4096] [--batches 1,2,4] [--n 4] [--rounds 2]

Every batch size must produce exactly the texts of batch 1 (left padding, greedy); the script says so or fails.
Run it on a quiet machine (`nice` does not stop other processes from sharing the cores).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from longctx_eval import Request


def needle_prompts(tokenizer: Any, length: int, n: int, seed: int = 0) -> list[Request]:
    """`n` needle-task prompts of about `length` tokens: synthetic prose, a number at mid-depth, the question last."""
    from data_builders import get_source

    paragraphs = get_source("synthetic").paragraphs(seed=seed)
    rng = random.Random(seed)
    out = []
    for i in range(n):
        parts, tokens = [], 0
        while tokens < length:
            p = next(paragraphs)
            parts.append(p)
            tokens += tokenizer.count(p + "\n\n")
        value = rng.randrange(100_000, 1_000_000)
        parts.insert(len(parts) // 2, f"The special magic number is {value}.")
        context = "\n\n".join(parts)
        question = "What is the special magic number?"
        prompt = f"Read the following text and answer the question after it.\n\n{context}\n\nQuestion: {question}"
        out.append(Request(f"b{length}-{i}", prompt, context, question, max_new_tokens=32))
    return out


def measure(adapter: Any, requests: list[Request], batch: int) -> tuple[float, list[str]]:
    """Samples per second of `adapter.generate` over `requests` at `batch`, and the texts."""
    adapter.batch_size = batch
    t0 = time.perf_counter()
    preds = adapter.generate(requests)
    return len(requests) / (time.perf_counter() - t0), [p.text or "" for p in preds]


def run(model: str, lengths: list[int], batches: list[int], n: int, rounds: int = 2) -> dict[str, Any]:
    """Measure every (length, batch) cell, best of `rounds` interleaved rounds; fails when a batch changes a text."""
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    adapter = load_model(parse_spec(model))
    measure(adapter, needle_prompts(adapter.tokenizer, 256, 2, seed=99), 2)  # warm-up
    rows = []
    for length in lengths:
        requests = needle_prompts(adapter.tokenizer, length, n)
        tokens = [adapter.prompt_tokens(r) for r in requests]
        best: dict[int, float] = {}
        reference = None
        for _ in range(rounds):  # interleaved, so a burst of load elsewhere hits every batch size alike
            for batch in batches:
                rate, texts = measure(adapter, requests, batch)
                reference = reference if reference is not None else texts
                if texts != reference:
                    raise SystemExit(
                        f"batch {batch} changed the greedy text at ~{length} tokens: {texts} vs {reference}"
                    )
                best[batch] = max(best.get(batch, 0.0), rate)
        for batch in batches:
            rows.append(
                {"length": length, "prompt_tokens": tokens, "batch": batch, "samples_per_s": round(best[batch], 4)}
            )
            print(
                f"~{length} tokens (measured {min(tokens)}-{max(tokens)}), batch {batch}: {best[batch]:.3f} samples/s"
            )
    return {"model": model, "n": n, "rounds": rounds, "max_new_tokens": 32, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--lengths", default="1024,4096")
    parser.add_argument("--batches", default="1,2,4")
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best of them is reported")
    parser.add_argument("--json", help="also write the measurements to this file")
    args = parser.parse_args(argv)
    result = run(
        args.model,
        [int(x) for x in args.lengths.split(",")],
        [int(x) for x in args.batches.split(",")],
        args.n,
        args.rounds,
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
