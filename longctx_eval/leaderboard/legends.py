"""What the board's cells, ranking and merge rule mean: the definitions every page keeps below its answers."""

from __future__ import annotations

from longctx_eval.leaderboard.breakdowns import DEFAULT_MIN_N
from longctx_eval.metrics.bootstrap import MIN_N_FOR_INTERVAL


def cell_legend(min_n: int = DEFAULT_MIN_N) -> str:
    """What a leaderboard cell says, shown above the tables (LEADERBOARD.md and the site)."""
    return (
        "Each cell is the task's primary metric at that context length (tokens), pooled over depths, with its 95% "
        "bootstrap interval (the haystacks or documents the samples were built from resampled, then the samples "
        "within each) and sample count; `n=100 over 4 haystacks, n_eff 31.2`: the samples come from 4 haystacks "
        "and, correlated within each, are worth about 31 independent samples (n / (1 + (mean cluster size - 1) "
        "ICC)); `n=2/5` marks a partial cell (2 of the 5 samples of the task's grid, "
        "or of those its `limit` took, evaluated); **limit: 100 of 306**: the run's `limit` took 100 of the grid's "
        "306 samples there (at most `limit` per length, spread over its strata). **n/a (over window)**: every sample "
        "at that length was longer than the model's context window; **N failed**: N requests failed (a server "
        "error, out of memory, a refused model): they are not scored, their reasons are listed under the table, "
        "and a rerun retries them; **failed: reason**: every "
        "request of the task failed; **not evaluated**: that length's samples were not run (`--limit`). "
        "**all** pools the lengths it names (never over-window ones; older run files: every length). "
        f"**low n**: fewer than {min_n} samples (the minimum n, `leaderboard --min-n`): the value is shown but "
        "never ranked or sorted on, and no effective length or contrast is shown from it; a cell of fewer than "
        f"{MIN_N_FOR_INTERVAL} samples, or from a single haystack or document, shows no interval. Models are "
        "ranked only on the lengths they share, each with n at or above the "
        "minimum: each table says its rule; a model sharing none (or with every cell low n) is listed under "
        "**Not ranked**, not ranked. Under each table: the task's **noise floor** and the **resolvable "
        "difference** at its cells' n (defined below)."
    )


CELL_LEGEND = cell_legend()
"""The legend at the default minimum n."""

MERGE_RULE = (
    "Per model, task and capability the latest result is shown (by the task's start time). A newer result of "
    "the same task version and arguments that covers less (fewer evaluated samples, no length or depth the "
    "shown one lacks) never replaces a fuller one: it is listed under **Not shown**. A newer task version or "
    "other task arguments always win; **Replaced** says when that dropped lengths or samples."
)
