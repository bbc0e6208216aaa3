"""The needle grid the `vllm` bench part serves (benchmarks/vllm_backends.py): its samples and requests, the runner's
serving order and a round-robin over documents against it, a warm-up request, and the prefix-sharing bound."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from benchmarks.vllm_server import SEED

MODEL = "smollm2-135m"
"""The model every backend serves; `vllm serve`'s name, window, CPU memory share and seed are those of
benchmarks/vllm_server.py, which the `vllm`-marked tests start too."""


def depth_grid(depths: int) -> list[float]:
    """The needle task's depths for `depths` of them (data_builders' grid)."""
    from data_builders import depth_grid as grid

    return grid(depths)


def prefix_bound(depths: Sequence[float]) -> float:
    """The most prefix sharing can save on the d samples of one haystack: d prefills against one full prefill plus,
    for each other depth in order, the part after its needle (the part before it is the previous sample's)."""
    xs = sorted(depths)
    return len(xs) / (1 + sum(1 - x for x in xs[:-1]))


def build_grid(tokenizer: Any, params: dict[str, Any]) -> tuple[Any, list[Any], list[Any]]:
    """(task, samples, requests in the runner's serving order) of the needle grid in `params`."""
    from longctx_eval.discovery import discover
    from longctx_eval.run.sampling import build_samples

    info = discover()["needle"]
    args = {"depths": int(params["depths"]), "per_cell": int(params["haystacks"])}
    task = info.build(args, lengths=list(params["lengths"]), seed=SEED, tokenizer=tokenizer)
    samples = build_samples(info, task, None).samples
    return task, samples, _requests(task, samples)


def _requests(task: Any, samples: Sequence[Any]) -> list[tuple[int, Any]]:
    out = []
    for i, s in enumerate(samples):
        reqs = task.requests(s)
        for part, r in enumerate(reqs if isinstance(reqs, list) else [reqs]):
            out.append((i, r if r.part == part else _with_part(r, part)))
    return out


def _with_part(r: Any, part: int) -> Any:
    from dataclasses import replace

    return replace(r, part=part)


def serving_order(bound: Any, samples: Sequence[Any], requests: list[tuple[int, Any]]) -> list[tuple[int, Any, int]]:
    """(sample index, request, prompt tokens) in the order `longctx-eval run` serves them."""
    from longctx_eval.run.runner import serving_order as runner_order

    return runner_order([(i, r, bound.prompt_tokens(r)) for i, r in requests], samples)


def round_robin(order: list[tuple[int, Any, int]], samples: Sequence[Any]) -> list[tuple[int, Any, int]]:
    """The same requests with no two of one haystack adjacent where the grid allows it: one from each document in
    turn (documents are a length's haystack and repetition), depths shuffled within each document."""
    groups: dict[tuple[int, int], list[tuple[int, Any, int]]] = {}
    for item in order:
        meta = samples[item[0]].metadata
        groups.setdefault((int(meta["target_tokens"]), int(meta.get("rep", 0))), []).append(item)
    rng = random.Random(SEED)
    queues = [rng.sample(g, len(g)) for _, g in sorted(groups.items())]
    out = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop())
    return out


def warm_request(order: list[tuple[int, Any, int]]) -> Any:
    """A short request sharing no 16-token block with the grid's prompts (the tail of one, under another question)."""
    from dataclasses import replace

    r = order[0][1]
    return replace(r, prompt="Warm-up. " + r.prompt[-1500:], context="warm-up", sample_id="warm-up")
