"""`python -m benchmarks` (`make bench`): every method in fresh processes, side by side, into benchmarks/results."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.corpus import Corpus, prepare
from benchmarks.environment import environment
from benchmarks.gpt2 import ensure_gpt2
from benchmarks.peers import METHODS
from benchmarks.runner import REPO, run_child
from longctx_eval.atomic_io import atomic_write_text
from longctx_eval.models.assets import cache_dir

PARTS = (
    "chunking",
    "semantic",
    "build",
    "coref",
    "sources",
    "posprobe",
    "peer_ruler",
    "retrieval_scale",
    "embedding_reuse",
    "gpu_check",
    "vllm",
    "prefix_order",
)


CORPUS_FREE = {"gpu_check", "embedding_reuse", "vllm", "prefix_order"}
"""Parts that need neither the benchmark document nor the GPT-2 tokenizer (`--parts gpu_check` fetches nothing)."""


def _committed_corpus(out: Path) -> dict[str, Any] | None:
    """The document the committed chunking results were measured on (the README header names it), if any."""
    path = out / "chunking.json"
    return json.loads(path.read_text()).get("corpus") if path.is_file() else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options; the defaults are the committed run."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--tokens", type=int, default=1_000_000, help="document length in GPT-2 tokens")
    p.add_argument("--source", default=None, help="haystack source spec (default: austen, else synthetic)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", type=int, default=3, help="timed runs per method (plus one untimed check run)")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated chunking methods")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    p.add_argument("--semantic-fraction", type=float, default=0.05, help="slice for ours in semantic mode")
    p.add_argument("--chonkie-fraction", type=float, default=0.01, help="slice for chonkie SemanticChunker")
    p.add_argument("--semantic-threads", type=int, default=1, help="torch threads for every semantic method")
    p.add_argument("--build-depths", type=int, default=3, help="needle samples built at the full length")
    p.add_argument("--build-backends", default="tiktoken,hf", help="GPT-2 backends to build with: tiktoken,hf")
    p.add_argument("--build-steps", default="assemble,samples", help="build: assemble (and the dataset), samples")
    p.add_argument("--build-speed-tasks", default="needle,needle_lowlex,cross_paragraph", help="build samples: tasks")
    p.add_argument("--build-speed-lengths", default="131072,1048576", help="build samples: lengths (MiniLM tokens)")
    p.add_argument("--build-speed-samples", type=int, default=4, help="build samples: samples timed per process")
    p.add_argument("--build-speed-runs", type=int, default=2, help="build samples: old/new process pairs per cell")
    p.add_argument("--build-baseline", default=BUILD_BASELINE, help="build samples: the commit timed as `old`")
    p.add_argument("--ruler-lengths", default="1024,2048,4096", help="peer_ruler: lengths, comma-separated")
    p.add_argument("--ruler-samples", type=int, default=4, help="peer_ruler: samples per length, each tool")
    p.add_argument("--reuse-length", type=int, default=131_072, help="embedding_reuse: haystack MiniLM tokens")
    p.add_argument("--reuse-samples", type=int, default=100, help="embedding_reuse: needle samples on it")
    p.add_argument("--vllm-lengths", default="1024,2048", help="vllm: needle lengths, comma-separated")
    p.add_argument("--vllm-depths", type=int, default=5, help="vllm: needle depths per haystack")
    p.add_argument("--vllm-haystacks", type=int, default=1, help="vllm: haystacks (repetitions) per length")
    p.add_argument("--vllm-backends", default="hf,vllm,served", help="vllm: hf,vllm,served (lm-eval runs in vllm)")
    p.add_argument(
        "--vllm-levers", default="all", choices=("all", "prefix"), help="vllm: levers switched off (prefix: only it)"
    )
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    return p.parse_args(argv)


def log(message: str) -> None:
    """Progress on stderr, so stdout carries only the final tables."""
    print(message, file=sys.stderr, flush=True)


def run_chunking(corpus: Corpus, methods: list[str], runs: int) -> dict[str, Any]:
    """A check run per method, then `runs` rounds with every method once per round (load drifts hit all alike)."""
    params = {"text": corpus.path}
    checks = {}
    for name in methods:
        log(f"chunking: {name} (check run)")
        checks[name] = run_child("chunk", {**params, "method": name, "check": True})
    timed: dict[str, list[dict[str, Any]]] = {name: [] for name in methods}
    load = [os.getloadavg()[0]]
    for round_no in range(runs):
        for name in methods:
            if "error" in checks[name]:
                continue
            r = run_child("chunk", {**params, "method": name})
            timed[name].append(r)
            log(f"chunking: round {round_no + 1}/{runs} {name}: {r.get('run_s', float('nan')):.2f} s")
        load.append(os.getloadavg()[0])
    summary = {name: report.summarize_method(checks[name], timed[name]) for name in methods}
    return {
        "methods": summary,
        "labels": {name: METHODS[name][0] for name in methods},
        "ratios": report.add_ratios(summary),
        "load_average_1min_per_round": [round(x, 2) for x in load],
        "raw_timed_runs": timed,
    }


def run_semantic(corpus: Corpus, ours_fraction: float, chonkie_fraction: float, threads: int) -> dict[str, Any]:
    """chonkie, ours fast and ours exact on the same small slice, ours fast and exact on a larger slice, all
    with the same torch thread count; fast vs exact compared on both. Full-length figures are extrapolated."""
    import tempfile

    from benchmarks.semantic import compare_precisions

    runs: dict[str, Any] = {}
    plan = [
        ("chonkie SemanticChunker", "chonkie", "", chonkie_fraction),
        ("ours fast (same slice)", "ours", "fast", chonkie_fraction),
        ("ours exact (same slice)", "ours", "exact", chonkie_fraction),
        ("ours fast (larger slice)", "ours", "fast", ours_fraction),
        ("ours exact (larger slice)", "ours", "exact", ours_fraction),
    ]
    out: dict[str, Any] = {"document_tokens": corpus.tokens, "torch_threads": threads, "runs": runs}
    out["extrapolation"] = "linear in tokens"
    with tempfile.TemporaryDirectory() as tmp:
        for label, method, precision, fraction in plan:
            log(f"semantic: {label}, {fraction:.0%} of the document")
            params = {"method": method, "text": corpus.path, "fraction": fraction, "threads": threads}
            if method == "ours":
                params |= {"precision": precision, "vectors_out": str(Path(tmp) / f"{label}.npz")}
            runs[label] = run_child("semantic", params)
        out["fast_vs_exact"] = {}
        for where in ("same slice", "larger slice"):
            fast, exact = runs[f"ours fast ({where})"], runs[f"ours exact ({where})"]
            if "error" not in fast and "error" not in exact:
                npz = [Path(tmp) / f"ours {p} ({where}).npz" for p in ("fast", "exact")]
                out["fast_vs_exact"][where] = compare_precisions(fast, exact, *npz)
    for r in runs.values():
        r.pop("spans", None)  # compared above; thousands of numbers are no use in the committed JSON
    theirs = runs["chonkie SemanticChunker"]
    out["ours_embedder"] = runs["ours fast (same slice)"].get("embedder")
    for key, label in (("ours_speedup_same_slice", "fast"), ("ours_exact_speedup_same_slice", "exact")):
        r = runs[f"ours {label} (same slice)"]
        if "error" not in theirs and "error" not in r:
            out[key] = round(r["tokens_per_s"] / theirs["tokens_per_s"], 2)
    return out


BUILD_BASELINE = "07d452c82c1f41532d1249525edfa01d05663ab9"
"""The last commit before sample building went through the paragraph memo and per-sentence BM25 statistics."""


def run_build(corpus: Corpus | None, depths: int, backends: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Per tokenizer backend: assemble one exact-length document, then build the needle dataset and chunk a sample;
    and (step `samples`) the tasks' sample builders, this checkout against the baseline commit's."""
    out: dict[str, Any] = {}
    steps = args.build_steps.split(",")
    if "samples" in steps:
        out["samples"] = run_build_speed(args)
    if "assemble" not in steps or corpus is None:
        return out
    for backend in backends:
        base = {"source": corpus.source, "tokens": corpus.tokens, "seed": corpus.seed, "backend": backend}
        log(f"build ({backend}): assemble {corpus.tokens:,} tokens")
        assemble = run_child("build", {**base, "step": "assemble"})
        log(f"build ({backend}): needle dataset, {depths} samples")
        dataset = run_child("build", {**base, "step": "dataset", "depths": depths})
        out[backend] = {"assemble": assemble, "dataset": dataset}
    return out


def _keep_committed_build(args: argparse.Namespace, build: dict[str, Any]) -> dict[str, Any]:
    """The committed build.json's steps not run this time, and its sample-builder cells not measured again."""
    path = args.out / "build.json"
    if not path.is_file():
        return build
    kept = json.loads(path.read_text()).get("build", {})
    out = {**kept, **build} if "assemble" not in args.build_steps.split(",") else {**build}
    old, new = kept.get("samples", {}), build.get("samples", {})
    if "cells" in old and "cells" in new and old.get("baseline") == new.get("baseline"):
        out["samples"] = {**new, "cells": {**old["cells"], **new["cells"]}}
    return out


def run_build_speed(args: argparse.Namespace) -> dict[str, Any]:
    """Old (the baseline commit's packages, `git archive`d) and new (this checkout) in alternating fresh processes,
    per (task, length): per-sample seconds, their ratio, and whether both built the same samples (dataset hash)."""
    import subprocess
    import tempfile

    cells: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.build_baseline, "longctx_eval", "data_builders", "tasks"],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            return {"error": f"git archive {args.build_baseline}: {archive.stderr.decode(errors='replace').strip()}"}
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        for task in args.build_speed_tasks.split(","):
            for length in (int(x) for x in args.build_speed_lengths.split(",")):
                params = {"step": "samples", "task": task, "length": length, "seed": 0}
                params["samples"] = args.build_speed_samples
                runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
                for i in range(args.build_speed_runs):
                    for which in ("old", "new") if i % 2 == 0 else ("new", "old"):
                        log(f"build samples: {task} at {length:,}, {which} (run {i + 1})")
                        code = base if which == "old" else None
                        runs[which].append(run_child("build", params, timeout_s=1800, code=code))
                cells[f"{task}@{length}"] = {"task": task, "length": length, **runs, **report.speed_summary(runs)}
    return {"baseline": args.build_baseline, "samples_per_process": args.build_speed_samples, "cells": cells}


def run_sources(corpus: Corpus) -> dict[str, Any]:
    """Each haystack source produces the benchmark document's length in characters, in a fresh process."""
    from benchmarks.sources import SOURCES

    out = {}
    for name in SOURCES:
        log(f"sources: {name}, {corpus.chars:,} chars")
        out[name] = run_child("sources", {"source": name, "chars": corpus.chars, "seed": corpus.seed})
    return out


def run_posprobe() -> dict[str, Any]:
    """The CI-sized position probe run, one model per fresh process (skipped without the reference weights)."""
    from benchmarks.posprobe import MODELS
    from longctx_eval.models.references import REFERENCE_ROOT

    if not (REFERENCE_ROOT / "tiny-rope" / "model.safetensors").is_file():
        return {"error": "reference weights not built (make reference-models)"}
    out = {}
    for name in MODELS:
        log(f"posprobe: {name}")
        out[name] = run_child("posprobe", {"model": name})
    return out


def write(out: Path, name: str, text: str) -> None:
    """One results file, atomically, readable by all (they are meant to be committed)."""
    atomic_write_text(out / name, text)
    (out / name).chmod(0o644)


def run_coref() -> dict[str, Any]:
    """Coref scorer speed on all of LitBank; the official Perl scorer too when $COREF_SCORER_PL names it."""
    import subprocess

    cmd = [sys.executable, "-m", "benchmarks.coref_speed"]
    perl = os.environ.get("COREF_SCORER_PL")
    if perl:
        cmd += ["--scorer-pl", perl]
    log("coref: scoring LitBank gold vs a perturbed response" + (" (and the Perl scorer)" if perl else ""))
    run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        return {"error": (run.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(run.stdout.strip().splitlines()[-1])


def run_gpu_check() -> dict[str, Any]:
    """The CPU half of benchmarks/gpu_check.py (tiny shapes on the CPU) in a fresh process; the GPU half is
    `python -m benchmarks.gpu_check` on a CUDA machine (results/gpu.json)."""
    import subprocess

    log("gpu_check: the CPU half (tiny Llama, Gemma 3 and Qwen2 shapes)")
    cmd = [sys.executable, "-m", "benchmarks.gpu_check", "--cpu"]
    run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    if run.returncode != 0 or not run.stdout.strip():
        return {"error": (run.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(run.stdout.strip().splitlines()[-1])


def _gpu_lines(cpu_half: dict[str, Any], out: Path) -> list[str]:
    from benchmarks.gpu_check import RESULTS_HOW_TO_RUN, RESULTS_INTRO, table

    lines = [
        "## GPU check (`benchmarks/gpu_check.py`)\n",
        RESULTS_INTRO,
        RESULTS_HOW_TO_RUN,
    ]
    gpu = out / "gpu.json"
    if gpu.is_file():
        lines += ["GPU run (results/gpu.json):\n", table(json.loads(gpu.read_text()))]
    else:
        lines.append("No GPU run yet: `python -m benchmarks.gpu_check` on a CUDA machine writes results/gpu.json.\n")
    if "error" in cpu_half:
        lines.append(f"CPU half not measured: {cpu_half['error']}\n")
    elif cpu_half:
        lines += ["CPU half:\n", table(cpu_half)]
    return lines


def _coref_lines(co: dict[str, Any]) -> list[str]:
    if "error" in co:
        return ["## Coreference scorer\n", f"Not measured: {co['error']}\n"]
    perl = (
        f" The official CoNLL-2012 scorer v8.01 (Perl, one process per metric) took {co['perl_seconds']} s on "
        f"the same files: **{co['speedup_wall']}x** slower."
        if "perl_seconds" in co
        else " The official Perl scorer is not packaged on PyPI or Debian; set COREF_SCORER_PL=path/scorer.pl "
        "to time it side by side (measured once here by hand: about 47 s, about 195x slower)."
    )
    return [
        "## Coreference scorer\n",
        f"`score_clusters` on all of LitBank ({co['documents']} documents, {co['key_mentions']:,} key mentions) "
        f"against a seeded perturbed response: {co['seconds_best']} s wall, {co['cpu_seconds_best']} s CPU "
        f"(best of the repeats), every metric.{perl}\n",
    ]


def _vllm_lines(v: dict[str, Any]) -> list[str]:
    from benchmarks.vllm_backends import table

    grid = v.get("grid", {})
    return [
        "## vLLM backends vs lm-evaluation-harness's vLLM backend (`benchmarks/vllm_backends.py`, SmolLM2, CPU)\n",
        f"The needle grid ({grid.get('lengths')} tokens x {grid.get('depths')} depths x {grid.get('haystacks')} "
        f"haystack(s), {v.get('samples')} samples) through `hf:`, `vllm:` in process and `openai:` against `vllm "
        "serve`, and through lm-eval 0.4.13's `--model vllm` on a custom task over the same samples: the same "
        "prompt text, tokenized by lm-eval into the same ids (checked), so the true prompt lengths are equal. Each "
        "backend in its own fresh process (vLLM's in .venv-vllm); each pass from a warm engine and an empty prefix "
        "cache; s/sample = the pass's wall time ÷ its samples, engine start excluded (shown apart).\n",
        table(v),
        *_cache_study_lines(v.get("cache_study")),
    ]


def _vllm_grid_lines(out: Path) -> list[str]:
    """The vllm part's runs on grids other than the default (benchmarks/results/vllm-*.json), each its own table."""
    from benchmarks.vllm_backends import table

    lines = []
    for path in sorted(out.glob("vllm-*.json")):
        data = json.loads(path.read_text())
        v = data.get("vllm", {})
        grid = v.get("grid", {})
        load = v.get("load_average_1min", {})
        levers = f"levers switched off: {v.get('levers', 'all')}"
        when = (  # a file written since sittings merge dates each sitting under its table
            f"{levers.capitalize()}.\n"
            if v.get("sittings")
            else f"Measured {data.get('environment', {}).get('date_utc', '')}, {levers}; 1-minute load average: "
            + ", ".join(f"{k} {x}" for k, x in load.items())
            + ".\n"
        )
        lines += [
            f"### The needle grid {grid.get('lengths')} x {grid.get('depths')} depths x {grid.get('haystacks')} "
            f"haystacks ({v.get('samples')} samples; `{path.name}`)\n",
            when,
            table(v),
        ]
    return lines


def _cache_study_lines(study: dict[str, Any] | None) -> list[str]:
    """The prefix-cache study (`benchmarks/vllm_priming.py`), where vllm.json holds one."""
    if not study:
        return []
    from benchmarks.vllm_priming import table as study_table

    return [
        "### vLLM's prefix cache, counted (`benchmarks/vllm_priming.py`)\n",
        f"`{study['command']}`, {study['date_utc']}: {study['note']}\n",
        study_table(study),
    ]


def markdown(meta: dict[str, Any], parts: dict[str, dict[str, Any]]) -> str:
    """benchmarks/results/README.md: how it was measured, then one table per part."""
    c, env = meta["corpus"], meta["environment"]
    if c is None:  # only corpus-free parts were ever run here
        lines = ["# Benchmark results (`make bench`)\n", *_gpu_lines(parts.get("gpu_check", {}), meta["out_dir"])]
        if "embedding_reuse" in parts:
            lines += _reuse_lines(parts["embedding_reuse"], meta["out_dir"])
        if "vllm" in parts:
            lines += _vllm_lines(parts["vllm"])
        lines += _vllm_grid_lines(meta["out_dir"])
        if "prefix_order" in parts:
            lines += _prefix_order_lines(parts["prefix_order"])
        if "samples" in parts.get("build", {}):
            lines += ["## Building samples\n", *report.speed_lines(parts["build"]["samples"])]
        return "\n".join(lines)
    lines = [
        "# Benchmark results (`make bench`)\n",
        f"Document: `{c['source']}` haystack, exactly {c['tokens']:,} GPT-2 tokens ({c['chars']:,} chars, sha256 "
        f"`{c['sha256'][:16]}…`).{' Fallback: ' + c['fallback_reason'] + '.' if c.get('fallback_reason') else ''} "
        f"Measured {env['date_utc']} on {env['cpus']} CPUs (load average at start {env['load_average_1_5_15']}), "
        f"Python {env['python']}. Every number comes from a fresh process per run; compare ratios, not seconds.\n",
        "GPT-2 tokens everywhere: tiktoken `r50k_base` for the peers and for ours (`tiktoken:r50k_base`); ours "
        "also through HF tokenizers with the same vocabulary converted to a `tokenizer.json` (same ids and "
        f"offsets on this document: {'yes' if c['backends_agree'] else '**no**'}). Budget 512 tokens, overlap 64.\n",
    ]
    if "chunking" in parts:
        ch = parts["chunking"]
        lines += [
            "## Chunking\n",
            "`chunk s`: the chunking call alone (text in memory, library imported, tokenizer loaded), median of "
            "the timed runs. `whole process s`: interpreter start to exit. `peak MiB`: the process's peak RSS "
            "(VmHWM). Token counts and overlaps are re-counted with tiktoken on the returned chunk texts.\n",
            report.chunking_table(ch["methods"], ch["labels"]),
            report.targets_table(ch["ratios"], ch["labels"]),
            "The peer times quoted in issue 3 (offline-assets.md Part B) are whole-process wall times.\n",
        ]
    if "semantic" in parts:
        sem = parts["semantic"]
        lines += [
            "## Semantic chunking (MiniLM)\n",
            "Measured on prefixes of the document (cut at a paragraph break); the full-length column is a "
            "**linear extrapolation**, not a measurement. Ours: 512/64, breakpoints at the 95th percentile of "
            f"adjacent-sentence distance, embedder `longctx_eval.models.semantic_embed.minilm_embedder`, fast "
            "(the default) and exact precision (docs/semantic.md). "
            "chonkie: threshold 0.5, chunk_size 512 (its own MiniLM token count), no overlap option. "
            f"Every method runs with torch threads = {sem.get('torch_threads', '?')} (on a shared machine "
            "more threads than free cores make OpenMP spin and slows every method several-fold).\n",
            report.semantic_table(sem),
        ]
        for key, what in (("ours_speedup_same_slice", "fast"), ("ours_exact_speedup_same_slice", "exact")):
            if key in sem:
                lines.append(f"On the same slice ours ({what}) is **{sem[key]}x** as fast as chonkie.\n")
        for where, q in sem.get("fast_vs_exact", {}).items():
            if "cosine_min" in q:
                lines.append(
                    f"Fast vs exact on the {where} ({q['sentences']:,} sentences): cosine of sentence vectors min "
                    f"{q['cosine_min']:.4f}, mean {q['cosine_mean']:.5f}; identical chunk spans "
                    f"{q['identical_chunk_share']:.1%} ({q['chunks_fast']} vs {q['chunks_exact']} chunks).\n"
                )
    if "build" in parts:
        lines += [
            "## Building at full length\n",
            "Each step in a fresh process. `assemble`: `data_builders.assemble` to exactly the document length. "
            "`needle dataset`: `data_builders.dataset.export.build_dataset('needle', ...)` (what `longctx-eval build` "
            "runs): one shared haystack document plus one sample row per depth, parquet and card; then one "
            "sample's context is materialized, chunked and indexed, and its needle looked up through the index.\n",
        ]
        for backend, steps in parts["build"].items():
            if backend != "samples":
                lines += [f"GPT-2 via {backend}:\n", report.build_table(steps)]
        if "samples" in parts["build"]:
            lines += report.speed_lines(parts["build"]["samples"])
    if "coref" in parts:
        lines += _coref_lines(parts["coref"])
    if "sources" in parts:
        from benchmarks.sources import sources_table

        lines += [
            "## Haystack sources\n",
            f"Each source produces the document's length in characters ({c['chars']:,}), in a fresh process, "
            "imports untimed. `synthetic`: the generated narrative. `austen_warm`: the cached real-prose corpus "
            "verified by hash and read (the warm path). `word_salad`: stdlib random words, a floor for any "
            "generator.\n",
            sources_table(parts["sources"]),
        ]
    if "posprobe" in parts:
        from benchmarks.posprobe import LENGTHS, LIMIT, posprobe_table

        pp = parts["posprobe"]
        lines += ["## Position probe, CI-sized run\n"]
        if "error" in pp:
            lines.append(f"Not measured: {pp['error']}\n")
        else:
            lines += [
                f"`longctx-eval run --tasks posprobe --lengths {LENGTHS} --limit {LIMIT}` on the committed "
                "reference models (the run `tests/cli/test_posprobe_run.py` checks for behaviour), one model per "
                "fresh process. `run s`: the `run` command alone; `whole process s`: interpreter start to exit.\n",
                posprobe_table(pp),
            ]
    if "peer_ruler" in parts:
        from benchmarks.peer_ruler import peer_ruler_table

        pr = parts["peer_ruler"]
        lines += [
            "## Needle vs lm-evaluation-harness RULER `niah_single_1` (SmolLM2, CPU)\n",
            f"One run of each tool in a fresh process, the same lengths, {pr.get('samples_per_length')} samples per "
            "length: ours is `longctx-eval run --model smollm2-135m --tasks needle --lengths ... --limit N`; "
            "lm-eval is `lm_eval run --model hf --model_args pretrained=<the same fp32 folder> --tasks niah_single_1 "
            "--apply_chat_template --batch_size 1`, samples picked per length with `--samples`. Seconds per sample "
            "from our predictions and from the times of lm-eval's progress lines; prompt tokens re-counted on what "
            "was sent (lm-eval's nominal length reserves 128 generation tokens); generated tokens include the end "
            "token. Speed-up > 1 means ours is faster.\n",
            peer_ruler_table(pr),
        ]
    if "retrieval_scale" in parts:
        from benchmarks.retrieval_scale import table as retrieval_scale_table

        rs = parts["retrieval_scale"]
        lines += [
            "## Retrieval at 128K and 1M tokens (MiniLM, BM25)\n",
            "`python -m benchmarks.retrieval_scale`: the `retrieval` task's document at each length (MiniLM tokens, "
            "austen haystack), its 24 queries answered by one retriever in a fresh process; `first`: empty index "
            "cache (chunk, embed or index, then query); `cached`: a second process reading the index from the disk "
            "cache. `first query s` includes indexing; `peak RSS`: the process's VmHWM (docs/retrieval.md).\n",
            retrieval_scale_table(rs),
        ]
    if "embedding_reuse" in parts:
        lines += _reuse_lines(parts["embedding_reuse"], meta.get("out_dir", REPO / "benchmarks" / "results"))
    if "gpu_check" in parts:
        lines += _gpu_lines(parts["gpu_check"], meta.get("out_dir", REPO / "benchmarks" / "results"))
    if "vllm" in parts:
        lines += _vllm_lines(parts["vllm"])
    lines += _vllm_grid_lines(meta.get("out_dir", REPO / "benchmarks" / "results"))
    if "prefix_order" in parts:
        lines += _prefix_order_lines(parts["prefix_order"])
    return "\n".join(lines)


def _prefix_order_lines(result: dict[str, Any]) -> list[str]:
    """The serving-order count of benchmarks/prefix_order.py."""
    from benchmarks.prefix_order import table

    return [
        "## Prefix reuse by serving order, SmolLM2's reference cells (`benchmarks/prefix_order.py`)\n",
        "The samples of the reference suite's `smollm2-135m` part rendered to the ids `hf:` sends, and the prompt "
        "tokens its prefix cache leaves to prefill (a request reuses the previous one's cache from "
        f"{result['min_shared_tokens']} shared leading tokens), counted, not timed, in the runner's order and in "
        "the depth order it replaced.\n",
        table(result),
    ]


def _reuse_lines(result: dict[str, Any], out: Path) -> list[str]:
    from benchmarks.embedding_reuse import table

    lines = [
        "## Embedding reuse across needle samples (MiniLM)\n",
        "`python -m benchmarks.embedding_reuse`: one `austen` haystack, 100 needle samples on it (the needle "
        "builder's insertion, every sample exactly the length), served by `minilm` and `minilm?chunking=resync` in "
        "a fresh process each with an empty cache. `ratio`: the 100 samples' seconds over the first sample's (a "
        "full pass: chunk, embed every chunk, query); without the chunk-vector cache every sample is a full pass. "
        "`== without cache`: the middle and last samples served again with a fresh memory-only cache give identical "
        "hits (spans and float scores; at 1M: random chunk vectors of the last sample, encoded again, equal the "
        "cached ones bit for bit). Second table: chunks of each sample that are no chunk of the bare haystack "
        "(docs/architecture.md, chunking).\n",
    ]

    def block(r: dict[str, Any]) -> list[str]:
        head = f"{r.get('length', 0):,} tokens, load average {r.get('load_average_at_start')} at the start:\n"
        return [head, table(r)] if "error" not in r.get("build", {}) else [f"Not measured: {r['build']['error']}\n"]

    lines += block(result)
    earlier = result.get("earlier_run_with_hits_check")
    if earlier:
        same = []
        for spec, r in earlier["runs"].items():
            verdict = "identical" if all(e["hits_equal"] for e in r["exact"].values()) else "**different**"
            same.append(f"`{spec}` samples {', '.join(r['exact'])}: {verdict}")
        lines.append(
            f"Hits served again without any cache ({earlier['note']}; load {earlier['load_average_at_start']}): "
            + "; ".join(same)
            + ".\n"
        )
    long = out / "embedding_reuse-1048576.json"
    if long.is_file():
        lines += block(json.loads(long.read_text()).get("embedding_reuse", {}))
    return lines


def _shown(path: Path) -> str:
    """`path` relative to the repository when inside it, so committed results name no machine's folders."""
    resolved = path.resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else str(path)


def main(argv: list[str] | None = None) -> int:
    """Run the selected parts and write results/*.json and results/README.md."""
    args = parse_args(argv)
    started = time.perf_counter()
    wanted = [p for p in args.parts.split(",") if p]
    unknown = [p for p in wanted if p not in PARTS] + [m for m in args.methods.split(",") if m not in METHODS]
    if unknown:
        raise SystemExit(f"unknown part or method {unknown}; parts: {PARTS}, methods: {list(METHODS)}")
    corpus: Corpus | None = None
    free = set(CORPUS_FREE) | ({"build"} if "assemble" not in args.build_steps.split(",") else set())
    if any(p not in free for p in wanted):
        ensure_gpt2()
        corpus = prepare(cache_dir() / "bench" / "corpus", args.tokens, args.seed, args.source)
        log(f"document: {corpus.source}, {corpus.tokens:,} tokens ({corpus.fallback_reason or 'preferred source'})")
    meta = {
        "environment": environment(REPO),
        "corpus": asdict(corpus) if corpus is not None else _committed_corpus(args.out),
        "settings": vars(args) | {"out": _shown(args.out)},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    parts: dict[str, dict[str, Any]] = {}
    if "chunking" in wanted:
        parts["chunking"] = run_chunking(corpus, args.methods.split(","), args.runs)
    if "semantic" in wanted:
        parts["semantic"] = run_semantic(corpus, args.semantic_fraction, args.chonkie_fraction, args.semantic_threads)
    if "build" in wanted:
        parts["build"] = run_build(corpus, args.build_depths, args.build_backends.split(","), args)
        parts["build"] = _keep_committed_build(args, parts["build"])
    if "coref" in wanted:
        parts["coref"] = run_coref()
    if "sources" in wanted:
        parts["sources"] = run_sources(corpus)
    if "posprobe" in wanted:
        parts["posprobe"] = run_posprobe()
    if "peer_ruler" in wanted:
        from benchmarks.peer_ruler import run_peer_ruler

        lengths = [int(x) for x in args.ruler_lengths.split(",")]
        parts["peer_ruler"] = run_peer_ruler(lengths, args.ruler_samples)
    if "retrieval_scale" in wanted:
        from benchmarks.retrieval_scale import run_retrieval_scale

        parts["retrieval_scale"] = run_retrieval_scale()
    if "embedding_reuse" in wanted:
        from benchmarks.embedding_reuse import run_embedding_reuse

        parts["embedding_reuse"] = run_embedding_reuse(args.reuse_length, args.reuse_samples)
    if "gpu_check" in wanted:
        parts["gpu_check"] = run_gpu_check()
    if "vllm" in wanted:
        from benchmarks.vllm_backends import run_vllm_part

        parts["vllm"] = run_vllm_part(
            [int(x) for x in args.vllm_lengths.split(",")],
            args.vllm_depths,
            args.vllm_haystacks,
            [b for b in args.vllm_backends.split(",") if b],
            levers=args.vllm_levers,
        )
        if "skipped" in parts["vllm"] and (args.out / "vllm.json").is_file():
            log("vllm: the committed results/vllm.json is kept (this run measured nothing)")
            parts.pop("vllm")
    if "prefix_order" in wanted:
        from benchmarks.prefix_order import run_prefix_order

        log("prefix_order: prompt tokens the hf prefix cache spares on the reference suite's SmolLM2 cells")
        parts["prefix_order"] = run_prefix_order(args.seed)
    meta["seconds"] = round(time.perf_counter() - started, 1)
    meta["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    from benchmarks.embedding_reuse import result_name
    from benchmarks.vllm_backends import result_name as vllm_name

    grid = ([int(x) for x in args.vllm_lengths.split(",")], args.vllm_depths, args.vllm_haystacks, args.vllm_levers)
    files = {name: f"{name}.json" for name in PARTS} | {
        "embedding_reuse": result_name(args.reuse_length),
        "vllm": vllm_name(*grid),
    }
    earlier = args.out / files["vllm"]
    if "vllm" in parts:  # backends an earlier sitting of this grid measured stay (benchmarks/vllm_sittings.py)
        from benchmarks.vllm_sittings import merge_sittings

        held = json.loads(earlier.read_text()) if earlier.is_file() else None
        parts["vllm"] = merge_sittings(parts["vllm"], held, meta["environment"]["date_utc"])
        study = (held or {}).get("vllm", {}).get("cache_study")  # the prefix-cache study is its own run
        if study:
            parts["vllm"].setdefault("cache_study", study)
    for name, data in parts.items():
        write(args.out, files[name], json.dumps({**meta, name: data}, indent=1) + "\n")
    if "vllm" in parts and "skipped" not in parts["vllm"]:  # its jobs' checkpoints are in the file now
        from benchmarks.vllm_backends import clear_checkpoints, job_params
        from benchmarks.vllm_sittings import measured_now

        ran = measured_now(parts["vllm"], [b for b in args.vllm_backends.split(",") if b])
        grid_params = {"lengths": grid[0], "depths": grid[1], "haystacks": grid[2]}
        clear_checkpoints({b: job_params(b, grid_params, args.vllm_levers) for b in ran})
    shown = dict(parts)
    for name in ("embedding_reuse", "vllm"):  # another length or grid: its own file; the README shows the committed
        if files[name] != f"{name}.json":  # default table, then the others (`_reuse_lines`, `_vllm_grid_lines`)
            shown.pop(name, None)
    for name in PARTS:  # parts not run this time keep their last committed results in the README
        if name not in shown and (args.out / f"{name}.json").is_file():
            shown[name] = json.loads((args.out / f"{name}.json").read_text()).get(name, {})
    header = {**meta, "out_dir": args.out}
    saved = args.out / "chunking.json"
    if "chunking" not in parts and saved.is_file():  # the header dates the chunking table under it, as measured
        header["environment"] = json.loads(saved.read_text()).get("environment", meta["environment"])
    text = markdown(header, {name: shown[name] for name in PARTS if name in shown})
    write(args.out, "README.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
