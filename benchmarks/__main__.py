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

from benchmarks import parts
from benchmarks.corpus import Corpus, prepare
from benchmarks.environment import environment
from benchmarks.gpt2 import ensure_gpt2
from benchmarks.peers import METHODS
from benchmarks.progress import log
from benchmarks.results_readme import markdown
from benchmarks.runner import REPO
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
    "loglikelihood",
    "gemma3_prefix",
    "gemma3_speed",
)
OPT_IN = {"gemma3_prefix", "gemma3_speed"}
"""Parts run only when named in --parts (Gemma 3 is opt-in: `make gemma3`; ~10-30 min each on 2 cores)."""


CORPUS_FREE = {"gpu_check", "embedding_reuse", "vllm", "prefix_order", "loglikelihood", "gemma3_prefix", "gemma3_speed"}
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
    p.add_argument(
        "--parts",
        default=",".join(p for p in PARTS if p not in OPT_IN),
        help=f"comma-separated subset of {','.join(PARTS)} (default: all but {','.join(sorted(OPT_IN))})",
    )
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
    p.add_argument("--build-baseline", default=parts.BUILD_BASELINE, help="build samples: the commit timed as `old`")
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
    p.add_argument("--gemma3-length", type=int, default=8192, help="gemma3_prefix: needle length (5 depths)")
    p.add_argument("--gemma3-lengths", default="4096,8192,16384", help="gemma3_speed: lengths, comma-separated")
    p.add_argument("--gemma3-threads", type=int, default=1, help="gemma3 parts: threads of each backend")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    return p.parse_args(argv)


def write(out: Path, name: str, text: str) -> None:
    """One results file, atomically, readable by all (they are meant to be committed)."""
    atomic_write_text(out / name, text)
    (out / name).chmod(0o644)


def _shown(path: Path) -> str:
    """`path` relative to the repository when inside it, so committed results name no machine's folders."""
    resolved = path.resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else str(path)


def _vllm_grid(args: argparse.Namespace) -> tuple[list[int], int, int, str]:
    """The vllm part's grid and lever set from the options: (lengths, depths, haystacks, levers)."""
    return [int(x) for x in args.vllm_lengths.split(",")], args.vllm_depths, args.vllm_haystacks, args.vllm_levers


def run_parts(args: argparse.Namespace, wanted: list[str], corpus: Corpus | None) -> dict[str, dict[str, Any]]:
    """Each wanted part's result, in PARTS order; a vllm part that measured nothing keeps the committed file."""
    lengths, depths, haystacks, levers = _vllm_grid(args)
    runs: dict[str, Any] = {
        "chunking": lambda: parts.run_chunking(corpus, args.methods.split(","), args.runs),
        "semantic": lambda: parts.run_semantic(
            corpus, args.semantic_fraction, args.chonkie_fraction, args.semantic_threads
        ),
        "build": lambda: parts.keep_committed_build(
            args, parts.run_build(corpus, args.build_depths, args.build_backends.split(","), args)
        ),
        "coref": parts.run_coref,
        "sources": lambda: parts.run_sources(corpus),
        "posprobe": parts.run_posprobe,
        "peer_ruler": lambda: _peer_ruler(args),
        "retrieval_scale": _retrieval_scale,
        "embedding_reuse": lambda: _embedding_reuse(args),
        "gpu_check": parts.run_gpu_check,
        "vllm": lambda: _vllm(lengths, depths, haystacks, [b for b in args.vllm_backends.split(",") if b], levers),
        "prefix_order": lambda: _prefix_order(args.seed),
        "loglikelihood": _loglikelihood,
        "gemma3_prefix": lambda: _gemma3_prefix(args),
        "gemma3_speed": lambda: _gemma3_speed(args),
    }
    out = {name: runs[name]() for name in PARTS if name in wanted}
    if "skipped" in out.get("vllm", {}) and (args.out / "vllm.json").is_file():
        log("vllm: the committed results/vllm.json is kept (this run measured nothing)")
        out.pop("vllm")
    return out


def _peer_ruler(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.peer_ruler import run_peer_ruler

    return run_peer_ruler([int(x) for x in args.ruler_lengths.split(",")], args.ruler_samples)


def _retrieval_scale() -> dict[str, Any]:
    from benchmarks.retrieval_scale import run_retrieval_scale

    return run_retrieval_scale()


def _embedding_reuse(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.embedding_reuse import run_embedding_reuse

    return run_embedding_reuse(args.reuse_length, args.reuse_samples)


def _vllm(lengths: list[int], depths: int, haystacks: int, backends: list[str], levers: str) -> dict[str, Any]:
    from benchmarks.vllm_backends import run_vllm_part

    return run_vllm_part(lengths, depths, haystacks, backends, levers=levers)


def _prefix_order(seed: int) -> dict[str, Any]:
    from benchmarks.prefix_order import run_prefix_order

    log("prefix_order: prompt tokens the hf prefix cache spares on the reference suite's SmolLM2 cells")
    return run_prefix_order(seed)


def _loglikelihood() -> dict[str, Any]:
    from benchmarks.loglikelihood_cost import run_loglikelihood_cost

    log("loglikelihood: K questions x C choices on one 4K document through loglikelihood, against one plain read")
    return run_loglikelihood_cost()


def _gemma3_prefix(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.gemma3_prefix import run_gemma3_prefix

    log(f"gemma3_prefix: Gemma 3 needle at {args.gemma3_length} over 5 depths, hf: prefix reuse on vs off")
    return run_gemma3_prefix(args.gemma3_length, threads=args.gemma3_threads)


def _gemma3_speed(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.gemma3_speed import BEFORE_LENGTHS, run_gemma3_speed

    lengths = tuple(int(x) for x in args.gemma3_lengths.split(","))
    log(f"gemma3_speed: Gemma 3 through hf: and llama.cpp's server at {lengths}")
    return run_gemma3_speed(lengths, tuple(n for n in BEFORE_LENGTHS if n in lengths), args.gemma3_threads)


def result_files(args: argparse.Namespace) -> dict[str, str]:
    """Each part's results file name: `<part>.json`, or another length's or grid's own file."""
    from benchmarks.embedding_reuse import result_name
    from benchmarks.vllm_backends import result_name as vllm_name

    return {name: f"{name}.json" for name in PARTS} | {
        "embedding_reuse": result_name(args.reuse_length),
        "vllm": vllm_name(*_vllm_grid(args)),
    }


def merge_vllm(part: dict[str, Any], earlier: Path, date_utc: str) -> dict[str, Any]:
    """This sitting's vllm result with the backends an earlier sitting of its grid measured (its results file), and
    the prefix-cache study that file held (benchmarks/vllm_sittings.py)."""
    from benchmarks.vllm_sittings import merge_sittings

    held = json.loads(earlier.read_text()) if earlier.is_file() else None
    merged = merge_sittings(part, held, date_utc)
    study = (held or {}).get("vllm", {}).get("cache_study")  # the prefix-cache study is its own run
    if study:
        merged.setdefault("cache_study", study)
    return merged


def clear_vllm_checkpoints(args: argparse.Namespace, part: dict[str, Any]) -> None:
    """Forget the checkpoints of the vllm jobs whose results the file now holds (a failed job keeps its own)."""
    from benchmarks.vllm_backends import clear_checkpoints, job_params
    from benchmarks.vllm_sittings import measured_now

    lengths, depths, haystacks, levers = _vllm_grid(args)
    ran = measured_now(part, [b for b in args.vllm_backends.split(",") if b])
    grid = {"lengths": lengths, "depths": depths, "haystacks": haystacks}
    clear_checkpoints({b: job_params(b, grid, levers) for b in ran})


def readme(
    args: argparse.Namespace, meta: dict[str, Any], ran: dict[str, dict[str, Any]], files: dict[str, str]
) -> str:
    """results/README.md over the parts run now and, for the others, their committed results files."""
    shown = dict(ran)
    for name in ("embedding_reuse", "vllm"):  # another length or grid: its own file; the README shows the committed
        if files[name] != f"{name}.json":  # default table, then the others (results_readme: reuse, vllm grids)
            shown.pop(name, None)
    for name in PARTS:  # parts not run this time keep their last committed results in the README
        if name not in shown and (args.out / f"{name}.json").is_file():
            shown[name] = json.loads((args.out / f"{name}.json").read_text()).get(name, {})
    header = {**meta, "out_dir": args.out}
    saved = args.out / "chunking.json"
    if "chunking" not in ran and saved.is_file():  # the header dates the chunking table under it, as measured
        header["environment"] = json.loads(saved.read_text()).get("environment", meta["environment"])
    return markdown(header, {name: shown[name] for name in PARTS if name in shown})


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
    ran = run_parts(args, wanted, corpus)
    meta["seconds"] = round(time.perf_counter() - started, 1)
    meta["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    files = result_files(args)
    if "vllm" in ran:  # backends an earlier sitting of this grid measured stay
        ran["vllm"] = merge_vllm(ran["vllm"], args.out / files["vllm"], meta["environment"]["date_utc"])
    for name, data in ran.items():
        write(args.out, files[name], json.dumps({**meta, name: data}, indent=1) + "\n")
    if "vllm" in ran and "skipped" not in ran["vllm"]:  # its jobs' checkpoints are in the file now
        clear_vllm_checkpoints(args, ran["vllm"])
    text = readme(args, meta, ran, files)
    write(args.out, "README.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
