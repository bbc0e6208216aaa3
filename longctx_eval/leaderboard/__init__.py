"""The leaderboard: merged run files as leaderboard.json, LEADERBOARD.md, plots and a site (docs/architecture.md)."""

from longctx_eval.old_paths import forward

__getattr__ = forward(
    __name__, "longctx_eval.leaderboard.build"
)  # the names of the old longctx_eval.leaderboard module, one release
