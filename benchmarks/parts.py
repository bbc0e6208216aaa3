"""The parent side of the parts `python -m benchmarks` measures in fresh processes (benchmarks/child.py runs each
measurement): chunking, semantic chunking, building, coreference scoring, haystack sources, the position probe and
the GPU check's CPU half. Each returns the part's result for its results file."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.corpus import Corpus
from benchmarks.peers import METHODS
from benchmarks.progress import log
from benchmarks.runner import REPO, run_child


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


def keep_committed_build(args: argparse.Namespace, build: dict[str, Any]) -> dict[str, Any]:
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
