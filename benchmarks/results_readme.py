"""benchmarks/results/README.md from the parts' results: how it was measured, then one section per part (the parts
not run this time keep their committed results). `python -m benchmarks` writes it (benchmarks/__main__.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks import report
from benchmarks.runner import REPO

RESULTS = REPO / "benchmarks" / "results"
"""Where `make bench` writes its results files and this README."""


def markdown(meta: dict[str, Any], parts: dict[str, dict[str, Any]]) -> str:
    """benchmarks/results/README.md: how it was measured, then one table per part."""
    c, env, out = meta["corpus"], meta["environment"], meta.get("out_dir", RESULTS)
    lines = ["# Benchmark results (`make bench`)\n"]
    if c is None:  # only corpus-free parts were ever run here
        lines += _gpu_lines(parts.get("gpu_check", {}), out)
        if "embedding_reuse" in parts:
            lines += _reuse_lines(parts["embedding_reuse"], out)
        if "vllm" in parts:
            lines += _vllm_lines(parts["vllm"])
        lines += vllm_grid_lines(out)
        if "prefix_order" in parts:
            lines += _prefix_order_lines(parts["prefix_order"])
        lines += _gemma3_lines(parts)
        if "samples" in parts.get("build", {}):
            lines += ["## Building samples\n", *report.speed_lines(parts["build"]["samples"])]
        return "\n".join(lines)
    sections = {
        "chunking": _chunking_lines,
        "semantic": _semantic_lines,
        "build": _build_lines,
        "coref": _coref_lines,
        "sources": lambda part: _sources_lines(part, c["chars"]),
        "posprobe": _posprobe_lines,
        "peer_ruler": _peer_ruler_lines,
        "retrieval_scale": _retrieval_scale_lines,
        "embedding_reuse": lambda part: _reuse_lines(part, out),
        "gpu_check": lambda part: _gpu_lines(part, out),
        "vllm": _vllm_lines,
    }
    lines += _header_lines(c, env)
    for name, section in sections.items():
        if name in parts:
            lines += section(parts[name])
    lines += vllm_grid_lines(out)
    if "prefix_order" in parts:
        lines += _prefix_order_lines(parts["prefix_order"])
    lines += _gemma3_lines(parts)
    return "\n".join(lines)


def _header_lines(c: dict[str, Any], env: dict[str, Any]) -> list[str]:
    """The document measured on, when and where, and the tokenizer every method counts in."""
    return [
        f"Document: `{c['source']}` haystack, exactly {c['tokens']:,} GPT-2 tokens ({c['chars']:,} chars, sha256 "
        f"`{c['sha256'][:16]}…`).{' Fallback: ' + c['fallback_reason'] + '.' if c.get('fallback_reason') else ''} "
        f"Measured {env['date_utc']} on {env['cpus']} CPUs (load average at start {env['load_average_1_5_15']}), "
        f"Python {env['python']}. Every number comes from a fresh process per run; compare ratios, not seconds.\n",
        "GPT-2 tokens everywhere: tiktoken `r50k_base` for the peers and for ours (`tiktoken:r50k_base`); ours "
        "also through HF tokenizers with the same vocabulary converted to a `tokenizer.json` (same ids and "
        f"offsets on this document: {'yes' if c['backends_agree'] else '**no**'}). Budget 512 tokens, overlap 64.\n",
    ]


def _chunking_lines(ch: dict[str, Any]) -> list[str]:
    """Chunking: every method's time, memory and checks, and the targets table."""
    return [
        "## Chunking\n",
        "`chunk s`: the chunking call alone (text in memory, library imported, tokenizer loaded), median of "
        "the timed runs. `whole process s`: interpreter start to exit. `peak MiB`: the process's peak RSS "
        "(VmHWM). Token counts and overlaps are re-counted with tiktoken on the returned chunk texts.\n",
        report.chunking_table(ch["methods"], ch["labels"]),
        report.targets_table(ch["ratios"], ch["labels"]),
        "The peer times quoted in issue 3 (offline-assets.md Part B) are whole-process wall times.\n",
    ]


def _semantic_lines(sem: dict[str, Any]) -> list[str]:
    """Semantic chunking (MiniLM) against chonkie's, and fast against exact precision."""
    lines = [
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
    return lines


def _build_lines(build: dict[str, Any]) -> list[str]:
    """Building at full length per GPT-2 backend, then the sample builders old against new."""
    lines = [
        "## Building at full length\n",
        "Each step in a fresh process. `assemble`: `data_builders.assemble` to exactly the document length. "
        "`needle dataset`: `data_builders.dataset.export.build_dataset('needle', ...)` (what `longctx-eval build` "
        "runs): one shared haystack document plus one sample row per depth, parquet and card; then one "
        "sample's context is materialized, chunked and indexed, and its needle looked up through the index.\n",
    ]
    for backend, steps in build.items():
        if backend != "samples":
            lines += [f"GPT-2 via {backend}:\n", report.build_table(steps)]
    if "samples" in build:
        lines += report.speed_lines(build["samples"])
    return lines


def _sources_lines(sources: dict[str, Any], chars: int) -> list[str]:
    """Each haystack source producing the document's length in characters."""
    from benchmarks.sources import sources_table

    return [
        "## Haystack sources\n",
        f"Each source produces the document's length in characters ({chars:,}), in a fresh process, "
        "imports untimed. `synthetic`: the generated narrative. `austen_warm`: the cached real-prose corpus "
        "verified by hash and read (the warm path). `word_salad`: stdlib random words, a floor for any "
        "generator.\n",
        sources_table(sources),
    ]


def _posprobe_lines(pp: dict[str, Any]) -> list[str]:
    """The CI-sized position probe run on the reference models."""
    from benchmarks.posprobe import LENGTHS, LIMIT, posprobe_table

    lines = ["## Position probe, CI-sized run\n"]
    if "error" in pp:
        lines.append(f"Not measured: {pp['error']}\n")
    else:
        lines += [
            f"`longctx-eval run --tasks posprobe --lengths {LENGTHS} --limit {LIMIT}` on the committed "
            "reference models (the run `tests/cli/test_posprobe_run.py` checks for behaviour), one model per "
            "fresh process. `run s`: the `run` command alone; `whole process s`: interpreter start to exit.\n",
            posprobe_table(pp),
        ]
    return lines


def _peer_ruler_lines(pr: dict[str, Any]) -> list[str]:
    """Needle against lm-evaluation-harness's RULER niah_single_1 on SmolLM2."""
    from benchmarks.peer_ruler import peer_ruler_table

    return [
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


def _retrieval_scale_lines(rs: dict[str, Any]) -> list[str]:
    """Retrieval at 128K and 1M tokens, first and cached."""
    from benchmarks.retrieval_scale import table as retrieval_scale_table

    return [
        "## Retrieval at 128K and 1M tokens (MiniLM, BM25)\n",
        "`python -m benchmarks.retrieval_scale`: the `retrieval` task's document at each length (MiniLM tokens, "
        "austen haystack), its 24 queries answered by one retriever in a fresh process; `first`: empty index "
        "cache (chunk, embed or index, then query); `cached`: a second process reading the index from the disk "
        "cache. `first query s` includes indexing; `peak RSS`: the process's VmHWM (docs/retrieval.md).\n",
        retrieval_scale_table(rs),
    ]


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
    from benchmarks.vllm_table import table

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


def vllm_grid_lines(out: Path) -> list[str]:
    """The vllm part's runs on grids other than the default (benchmarks/results/vllm-*.json), each its own table."""
    from benchmarks.vllm_table import table

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


def _gemma3_lines(parts: dict[str, dict[str, Any]]) -> list[str]:
    """The Gemma 3 270M parts (benchmarks/gemma3_prefix.py, benchmarks/gemma3_speed.py), where measured."""
    lines: list[str] = []
    if "gemma3_prefix" in parts:
        from benchmarks.gemma3_prefix import table as prefix_table

        r = parts["gemma3_prefix"]
        lines += [
            "## Gemma 3 270M: prefix reuse against its bound (`benchmarks/gemma3_prefix.py`)\n",
            f"`hf:` needle at {r.get('length')} over 5 depths of one haystack, prefix cache on and off in turn.\n",
            prefix_table(r),
        ]
    if "gemma3_speed" in parts:
        from benchmarks.gemma3_speed import table as speed_table

        lines += [
            "## Gemma 3 270M: `hf:` against llama.cpp's server (`benchmarks/gemma3_speed.py`)\n",
            "One needle prompt per length, each backend in turn; llama.cpp with "
            "`--logits_all False --flash_attn True`.\n",
            speed_table(parts["gemma3_speed"]),
        ]
    return lines


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
