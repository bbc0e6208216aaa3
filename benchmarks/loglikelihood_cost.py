"""What scoring K questions x C choices on one document costs through `loglikelihood`, against one plain read of it.

On SmolLM2-135M (`hf:`, the packaged weights, CPU) and a synthetic document of about `tokens` tokens, side by side
in one process:
- `read`: one prompt (document + one question), prefilled from nothing, then a short greedy decode (`decode`
  tokens): what any evaluation of the document costs at least;
- `loglikelihood`: the K questions (each with C choices) as K requests through `loglikelihood`, in order, the cache
  empty at the start: the document is prefilled once, then each request prefills its question and scores its
  choices' tokens against the cache;
- `loglikelihood, no prefix cache` (`prefix_cache=false`): the same without reuse across requests, K prefills
  (timed once: a contrast).
The ratio `loglikelihood / read` is the issue's measure (goal: at most 1.3). Read and loglikelihood are timed `runs`
times, alternating, the fastest kept (the machine is shared). Also counted: the tokens each prefilled (exact).

`python -m benchmarks.loglikelihood_cost OUT.json` (or `make bench BENCH_ARGS='--parts loglikelihood'`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from longctx_eval.atomic_io import atomic_write_text

GOAL_RATIO = 1.3
"""The issue's bound: scoring a document's questions costs at most this times one read of it."""
QUESTIONS = (
    "Who gave the key to the gardener?",
    "Who watched from the orchard wall?",
    "Who locked the gate at night?",
    "Who found the letter in the ledger?",
    "Who carried the lantern to the harbour?",
    "Who was the gardener's sister?",
    "Who wrote the last entry in the ledger?",
    "Who left the town before the storm?",
    "Who kept the ledgers of grain and salt?",
    "Who spoke to the magistrate?",
    "Who mended the nets by the quay?",
    "Who read the letter aloud?",
)
CHOICES = (" Mary", " Tom", " the gardener", " Anna", " the magistrate", " the clerk", " Peter", " the sister")


def document(tokens: int, hf_tok: Any, seed: int = 0) -> str:
    """Synthetic prose of at least `tokens` tokens of `hf_tok`, opening with the people the questions ask about."""
    from data_builders import get_source

    paragraphs = get_source("synthetic").paragraphs(seed=seed)
    parts = ["Mary gave the gardener a key at the gate. Tom watched her from the orchard wall and said nothing."]
    while len(hf_tok("\n\n".join(parts), add_special_tokens=False)["input_ids"]) < tokens:
        parts.append(next(paragraphs))
    return "\n\n".join(parts)


def run_loglikelihood_cost(
    tokens: int = 4096, questions: int = 8, choices: int = 4, decode: int = 16, runs: int = 2
) -> dict[str, Any]:
    """The three timings and their ratios for one document (see the module doc)."""
    import torch

    from longctx_eval.capability import Capability
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.sample import Request

    model = load_model(parse_spec("smollm2-135m"))
    plain = load_model(parse_spec("smollm2-135m?prefix_cache=false"))
    doc = document(tokens, model.hf_tok)

    def ask(i: int, with_choices: bool) -> Request:
        q = QUESTIONS[i % len(QUESTIONS)]
        return Request(
            "doc",
            f"{doc}\n\nQuestion: {q}",
            doc,
            q,
            max_new_tokens=decode,
            part=i,
            answer_prefix="Answer:",
            choices=CHOICES[:choices] if with_choices else (),
        )

    read = ask(0, False)
    asks = [ask(i, True) for i in range(questions)]

    def time_read() -> float:
        model.prefix_cache.clear()
        t0 = time.perf_counter()
        pred = model.generate([read])[0]
        assert pred.status == "ok" and pred.data.get("cached_tokens") == 0
        return time.perf_counter() - t0

    def time_scores(m: Any) -> tuple[float, list[Any]]:
        if m.prefix_cache is not None:
            m.prefix_cache.clear()
        t0 = time.perf_counter()
        preds = m.serve(Capability.LOGLIKELIHOOD, asks)
        assert all(p.status == "ok" for p in preds), [p.error for p in preds]
        return time.perf_counter() - t0, preds

    time_read()  # warm-up: the first forward pays one-off allocations
    seconds: dict[str, list[float]] = {"read": [], "loglikelihood": [], "no_prefix_cache": []}
    preds: list[Any] = []
    for _ in range(runs):
        seconds["read"].append(time_read())
        took, preds = time_scores(model)
        seconds["loglikelihood"].append(took)
    seconds["no_prefix_cache"].append(time_scores(plain)[0])  # a contrast (K prefills): timed once
    best = {k: min(v) for k, v in seconds.items()}
    prompt = model.prompt_tokens(asks[0])
    cached = [p.data.get("cached_tokens", 0) for p in preds]
    choice_tokens = sum(sum(p.data["choice_tokens"]) for p in preds)
    prefilled = sum(p.prompt_tokens - c for p, c in zip(preds, cached, strict=True))
    result = {
        "model": "smollm2-135m (hf:, float32)",
        "device": str(model.input_device),
        "torch_threads": torch.get_num_threads(),
        "document_tokens": len(model.hf_tok(doc, add_special_tokens=False)["input_ids"]),
        "prompt_tokens": prompt,
        "questions": questions,
        "choices": choices,
        "decode_tokens": decode,
        "runs": runs,
        "seconds": {k: [round(x, 4) for x in v] for k, v in seconds.items()},
        "best_seconds": {k: round(v, 4) for k, v in best.items()},
        "ratio": round(best["loglikelihood"] / best["read"], 4),
        "ratio_no_prefix_cache": round(best["no_prefix_cache"] / best["read"], 4),
        "goal_ratio": GOAL_RATIO,
        "tokens_prefilled": {
            "read": model.prompt_tokens(read),
            "loglikelihood_prompts": prefilled,
            "loglikelihood_choice_tokens": choice_tokens,
            "no_prefix_cache_prompts": sum(p.prompt_tokens for p in preds),
        },
    }
    model.close()
    plain.close()
    return result


def main(argv: list[str]) -> int:
    """`python -m benchmarks.loglikelihood_cost OUT.json [TOKENS]`: run and write the result."""
    tokens = int(argv[2]) if len(argv) > 2 else 4096
    result = run_loglikelihood_cost(tokens)
    atomic_write_text(Path(argv[1]), json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
