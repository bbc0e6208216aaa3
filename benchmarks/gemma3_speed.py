"""Gemma 3 270M through `hf:` against llama.cpp's server on the same prompts: prefill tokens/s and decode s/token.

One needle sample per length (its depth 0.5 haystack, the chat-templated ids `hf:` sends; llama.cpp gets the same
text and counts its tokens itself), served by each backend in turn within one process, length by length, so load
drift on a shared machine hits both alike: `hf:` is the `gemma3-270m` short name (fp32, the converted folder, prefix
cache on but cleared before each prompt); llama.cpp is llama-cpp-python's server on the Q4_K_M GGUF it was converted
from, started with the recipe of docs/served.md (`--logits_all False --flash_attn True`, one slot) and sent a
one-token prompt before each timed one so that it reuses no prefix either. Both run on the same number of threads.
Prefill is the time to the first token; decode the seconds after it over the tokens decoded after it (end token
included where the reply ended on one). The `hf (cache copied)` lane, at `before_lengths`, is `hf:` with the
cache layers transformers appends by copying (`PrefixCache.grow_in_place = False`): the decode cost
models/hf/growing_cache.py removes. `lm_head_rows` records how many positions the prefill computed logits for.

`python -m benchmarks.gemma3_speed OUT.json [LENGTHS]` (or `make bench BENCH_ARGS='--parts gemma3_speed'`, after
`make gemma3`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.progress import log

LENGTHS = (4096, 8192, 16384)
BEFORE_LENGTHS: tuple[int, ...] = ()
"""Lengths with the copied-cache lane: none by default (each costs another full prefill; on 2 busy cores an 8K one
took 8 minutes)."""
THREADS = 1
"""Threads of each backend: on the 2 shared cores here one thread each (two threads under load spin at every barrier
and ran 5-10x slower for both; docs/served.md)."""


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def skipped() -> str | None:
    """Why this part cannot run here, or None."""
    import importlib.util

    from longctx_eval.models.assets import gemma3_installed

    if not gemma3_installed():
        return "Gemma 3 270M is not installed (`make gemma3`)"
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        return "llama-cpp-python[server] is not installed (`make test` installs it)"
    return None


def _hf_row(model: Any, request: Any, grow: bool) -> dict[str, Any]:
    """One `hf:` generation with a cleared prefix cache: its prefill and decode timing and reply."""
    model.prefix_cache.clear()
    model.prefix_cache.grow_in_place = grow
    load = _load()
    (pred,) = model.generate([request])
    timing = pred.data["timing"]
    steps = max(int(pred.completion_tokens or 0) - 1, 0)
    return {
        "prompt_tokens": pred.prompt_tokens,
        "prefill_s": round(timing["ttft_s"], 3),
        "decode_s": round(timing["decode_s"], 3),
        "decode_steps": steps,
        "reply": pred.text,
        "load": load,
    }


def _llama_row(url: str, text: str, max_tokens: int) -> dict[str, Any]:
    """One llama.cpp completion after a prompt that shares nothing with it."""
    from benchmarks.llama_cpp_server import forget_prompt, prompt_tokens, timed_completion

    n = prompt_tokens(url, text)
    forget_prompt(url)
    load = _load()
    out = timed_completion(url, text, max_tokens)
    steps = out["tokens"] - (1 if out["tokens"] >= max_tokens else 0)  # the end token's step, where it ended on one
    return {
        "prompt_tokens": n,
        "prefill_s": round(out["ttft_s"], 3),
        "decode_s": round(out["decode_s"], 3),
        "decode_steps": steps,
        "reply": out["text"],
        "load": load,
    }


def _rates(row: dict[str, Any]) -> dict[str, Any]:
    steps = row["decode_steps"]
    return row | {
        "prefill_tok_s": round(row["prompt_tokens"] / row["prefill_s"], 1) if row["prefill_s"] else None,
        "decode_s_per_token": round(row["decode_s"] / steps, 4) if steps else None,
    }


def run_gemma3_speed(
    lengths: tuple[int, ...] = LENGTHS,
    before_lengths: tuple[int, ...] = BEFORE_LENGTHS,
    threads: int = THREADS,
    partial: Path | None = None,
) -> dict[str, Any]:
    """Per length: the `hf:` row, the llama.cpp row and (at `before_lengths`) the copied-cache `hf:` row; the rows
    measured so far are written to `partial` after each length, if given (a stopped sitting keeps them)."""
    why = skipped()
    if why:
        log(f"gemma3_speed: skipped: {why}")
        return {"skipped": why}
    os.environ["OMP_NUM_THREADS"] = str(threads)  # the adapter keeps a thread count the environment sets
    import torch

    torch.set_num_threads(threads)
    from benchmarks.environment import versions
    from benchmarks.llama_cpp_server import llama_server
    from benchmarks.vllm_grid import build_grid
    from longctx_eval.models.assets import gemma3_gguf
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec

    t0 = time.perf_counter()
    model = load_model(parse_spec("gemma3-270m"))
    rows_at_prefill: list[int] = []
    hook = model.model.lm_head.register_forward_hook(lambda _m, args, _o: rows_at_prefill.append(args[0].shape[1]))
    _task, samples, requests = build_grid(model.tokenizer, {"lengths": list(lengths), "depths": 1, "haystacks": 1})
    by_length = {int(samples[i].metadata["target_tokens"]): r for i, r in requests}
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        llama_server(gemma3_gguf(), max(lengths), threads, Path(tmp) / "log") as url,
    ):
        for length in lengths:
            request = by_length[length]
            ids = model.render(request)
            text = model.hf_tok.decode(ids, skip_special_tokens=False).removeprefix(model.hf_tok.bos_token or "")
            log(f"  gemma3_speed {length}: hf (load {_load()})")
            rows_at_prefill.clear()
            hf = _rates(_hf_row(model, request, grow=True))
            hf["lm_head_rows_at_prefill"] = rows_at_prefill[0] if rows_at_prefill else None
            log(f"  gemma3_speed {length}: llama.cpp (load {_load()})")
            llama = _rates(_llama_row(url, text, request.max_new_tokens))
            row = {"length": length, "hf": hf, "llama_cpp": llama}
            if length in before_lengths:
                log(f"  gemma3_speed {length}: hf, cache copied per token (load {_load()})")
                row["hf_copied_cache"] = _rates(_hf_row(model, request, grow=False))
            rows.append(row)
            log(f"  gemma3_speed {length}: {_line(row)}")
            if partial is not None:
                partial.write_text(json.dumps(rows, indent=1) + "\n")
    hook.remove()
    model.close()
    return {
        "model": "gemma3-270m",
        "hf_spec": "gemma3-270m (hf:, fp32, converted from the GGUF)",
        "llama_cpp": {"gguf": gemma3_gguf().name, "recipe": "--logits_all False --flash_attn True, one slot"},
        "threads": threads,
        "versions": versions(["torch", "transformers", "llama_cpp_python"]),
        "rows": rows,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _line(row: dict[str, Any]) -> str:
    hf, ll = row["hf"], row["llama_cpp"]
    return (
        f"prefill {hf['prefill_tok_s']} vs {ll['prefill_tok_s']} tok/s, "
        f"decode {hf['decode_s_per_token']} vs {ll['decode_s_per_token']} s/token"
    )


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


def table(result: dict[str, Any]) -> str:
    """The side-by-side table: per length each backend's prefill tokens/s and decode s/token, and the ratios."""
    if "skipped" in result:
        return f"Not measured: {result['skipped']}.\n"
    head = (
        "| length | prompt tokens (hf / llama.cpp) | prefill tok/s hf | llama.cpp | hf ÷ llama.cpp | decode s/token hf "
        "| llama.cpp | hf ÷ llama.cpp | hf, cache copied per token | replies equal | load |\n"
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n"
    )
    body = ""
    for r in result["rows"]:
        hf, ll, before = r["hf"], r["llama_cpp"], r.get("hf_copied_cache")
        copied = ""
        if before:
            ours = _ratio(hf["decode_s_per_token"], before["decode_s_per_token"])
            copied = f"{before['decode_s_per_token']} s/token (ours {ours})"
        body += (
            f"| {r['length']} | {hf['prompt_tokens']} / {ll['prompt_tokens']} | {hf['prefill_tok_s']} | "
            f"{ll['prefill_tok_s']} | {_ratio(hf['prefill_tok_s'], ll['prefill_tok_s'])} | "
            f"{hf['decode_s_per_token']} | {ll['decode_s_per_token']} | "
            f"{_ratio(hf['decode_s_per_token'], ll['decode_s_per_token'])} | {copied} | "
            f"{'yes' if hf['reply'].strip() == ll['reply'].strip() else 'no'} | {hf['load']}-{ll['load']} |\n"
        )
    return (
        head
        + body
        + f"\n{result['threads']} thread(s) each; prefill ratio above 1 means `hf:` is faster, decode ratio above 1 "
        "means `hf:` is slower; load is the 1-minute load average at each backend's start.\n"
    )


if __name__ == "__main__":
    out = Path(sys.argv[1])
    chosen = tuple(int(x) for x in sys.argv[2].split(",")) if len(sys.argv) > 2 else LENGTHS
    result = run_gemma3_speed(chosen, partial=out.with_suffix(".partial.json"))
    Path(sys.argv[1]).write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
