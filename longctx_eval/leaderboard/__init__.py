"""longctx_eval/leaderboard: see docs/architecture.md."""

from longctx_eval.old_paths import forward

__getattr__ = forward(__name__)  # the old longctx_eval.leaderboard module's names, one release
