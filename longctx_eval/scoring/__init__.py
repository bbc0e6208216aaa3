"""Scoring: run.json rows computed from saved predictions and gold (see docs/architecture.md)."""

from longctx_eval.old_paths import forward

__getattr__ = forward(__name__)  # the old longctx_eval.scoring module's names, one release
