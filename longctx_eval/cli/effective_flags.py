"""The effective-length threshold options shared by `run` and `score`."""

from __future__ import annotations

import argparse

from longctx_eval.scoring.effective_length import DEFAULT_FRACTION, DEFAULT_THRESHOLD, EffectiveLengthConfig


def add_effective_flags(p: argparse.ArgumentParser) -> None:
    """Add --effective-threshold and --effective-relative."""
    p.add_argument(
        "--effective-threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        metavar="FRACTION",
        help=f"absolute effective length: the score (0-1) to stay at or above (default {DEFAULT_THRESHOLD}, "
        "RULER's 85.6%%)",
    )
    p.add_argument(
        "--effective-relative",
        type=float,
        default=DEFAULT_FRACTION,
        metavar="FRACTION",
        help="relative effective length: the share of the model's own score at its shortest length to stay at "
        f"or above (default {DEFAULT_FRACTION}, as NoLiMa)",
    )


def effective_config(args: argparse.Namespace) -> EffectiveLengthConfig:
    """The options as a checked config; a percentage (85.6) is a ConfigError saying to give 0.856."""
    return EffectiveLengthConfig(threshold=args.effective_threshold, fraction=args.effective_relative)
