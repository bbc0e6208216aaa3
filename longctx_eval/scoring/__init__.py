"""Scoring: run.json rows computed from saved predictions and gold (see docs/architecture.md)."""

from longctx_eval.old_paths import forward

__getattr__ = forward(
    __name__, "longctx_eval.scoring.score"
)  # the names of the old longctx_eval.scoring module, one release
