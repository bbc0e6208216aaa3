"""The composite-score options shared by `run` and `score` (docs/served.md#composite-score)."""

from __future__ import annotations

import argparse

from longctx_eval.scoring.composite import LATENCY_KINDS, CompositeConfig, parse_weights


def add_composite_flags(p: argparse.ArgumentParser) -> None:
    """Add --composite-weights and --composite-latency."""
    p.add_argument(
        "--composite-weights",
        default="0.3,0.25,0.25,0.2",
        metavar="T,L,R,F",
        help="served runs' composite score: weights of throughput, P95 latency, recall and semantic fidelity "
        "(default %(default)s; divided by their sum)",
    )
    p.add_argument(
        "--composite-latency",
        choices=LATENCY_KINDS,
        default="ttft",
        help="the latency whose P95 the composite scores: time to first token or end to end (default %(default)s)",
    )


def composite_config(args: argparse.Namespace) -> CompositeConfig:
    """The options as a checked config."""
    return CompositeConfig(weights=parse_weights(args.composite_weights), latency=args.composite_latency)
