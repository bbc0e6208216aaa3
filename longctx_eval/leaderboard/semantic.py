"""A task's semantic-fidelity table on the board (run.json `semantic` and `results`; its plot: `drift_plot.py`).

Per model: pooled BERTScore F1, P, R and embedding similarity with their intervals (the run file's rows: clusters
resampled, then samples within them), the drift (how many batch groups of its answers sit significantly below or
above its own mean F1, and the largest drop) and the encoder, layer, idf, rescaling and embedder used. Read from
run files alone, so boards of run copies show it too.
"""

from __future__ import annotations

from collections.abc import Sequence

from longctx_eval.leaderboard.page_model import Block, Cell, Table, marked, name_cell, para
from longctx_eval.metrics.bertscore import BERTSCORE_FIELDS
from longctx_eval.metrics.bootstrap import has_interval
from longctx_eval.metrics.cluster_stats import DEFAULT_NOUN, count_text
from longctx_eval.metrics.embedding_similarity import EMBEDDING_FIELD
from longctx_eval.results import MetricResult, SemanticSection, TaskResult
from longctx_eval.scoring.labels import DASH

Board = Sequence[tuple[str, TaskResult]]
"""A task's rows in table order: (model name, its result)."""

NOTE = (
    "Semantic fidelity (docs/semantic_fidelity.md): BERTScore of each answer against the gold answers (greedy "
    "cosine matching of one layer's token embeddings, equal to the bert_score package) and embedding similarity "
    "(cosine of sentence embeddings); pooled means with 95% intervals over clusters, then samples. They score "
    "answers of up to 512 word pieces, never a whole context. **drift**: batch groups (the runner's batches, "
    "merged to at least `min` answers, shortest contexts first) whose 95% interval lies below / above the "
    "model's own mean F1, and the largest drop of a group's mean F1 from it:"
)
HEAD = ["model", "BERTScore F1", "P", "R", "embedding similarity", "drift (below / above, largest drop)", "setup"]


def _pooled(result: TaskResult, metric: str) -> MetricResult | None:
    return next((r for r in result.results if r.metric == metric and r.length is None and r.depth is None), None)


def _cell(row: MetricResult | None, count: bool = False, noun: str = DEFAULT_NOUN) -> str:
    """'0.912 [0.897, 0.925]' (with `count`: ' n=60 over 12 haystacks', the task's `noun`), or the value alone with
    'no interval' where too few samples or clusters stand behind it."""
    if row is None:
        return DASH
    over = f" over {count_text(row.clusters, noun)}" if row.clusters is not None and row.clusters < row.n else ""
    n = f" n={row.n}{over}" if count else ""
    if not has_interval(row.n, row.clusters):
        return f"{row.value:.3f}{n}, no interval"
    return f"{row.value:.3f} [{row.ci95[0]:.3f}, {row.ci95[1]:.3f}]{n}"


def drift_text(section: SemanticSection) -> str:
    """'2 / 0 of 12 groups (min 10), -0.081 at batches 40-49', or a dash without two groups."""
    points = section.drift
    if len(points) < 2:
        return DASH
    tested = [p for p in points if has_interval(p.n, p.clusters)]
    below = sum(p.ci95[1] < p.bertscore_f1 - p.delta_f1 for p in tested)
    above = sum(p.ci95[0] > p.bertscore_f1 - p.delta_f1 for p in tested)
    worst = min(points, key=lambda p: p.delta_f1)
    size = f"{'answers' if section.batches == 'order' else 'min'} {section.min_point}"
    if worst.delta_f1 >= 0:
        return f"{below} / {above} of {len(points)} groups ({size}), none below the mean"
    where = f"{worst.first_batch}" + (f"-{worst.last_batch}" if worst.last_batch != worst.first_batch else "")
    label = "batch" if worst.last_batch == worst.first_batch else "batches"
    return f"{below} / {above} of {len(points)} groups ({size}), {worst.delta_f1:+.3f} at {label} {where}"


def setup_text(section: SemanticSection) -> str:
    """'all-MiniLM-L6-v2 layer 5 of 6, no idf, raw; embedder all-MiniLM-L6-v2 (53aa5117)'."""
    b, e = section.bertscore, section.embedding
    rescale = "raw" if b.baseline is None else "rescaled by " + "/".join(f"{x:g}" for x in b.baseline)
    sha = f" ({e.sha256[:8]})" if e.sha256 else ""
    bsha = f" ({b.sha256[:8]})" if b.sha256 else ""
    return (
        f"{b.name}{bsha} layer {b.layer} of {b.layers}, {'idf' if b.idf else 'no idf'}, {rescale}; "
        f"embedder {e.name}{sha}"
    )


def semantic_rows(board: Board) -> list[list[str]]:
    """Per model whose result has a semantic section: its cells (plain text; the renderer escapes them)."""
    rows = []
    for name, result in board:
        section = getattr(result, "semantic", None)
        if section is None:
            continue
        f1, p, r = (_pooled(result, f) for f in (BERTSCORE_FIELDS[2], *BERTSCORE_FIELDS[:2]))
        noun = result.cluster_noun or DEFAULT_NOUN
        cells = [_cell(f1, True, noun), _cell(p), _cell(r), _cell(_pooled(result, EMBEDDING_FIELD))]
        rows.append([name, *cells, drift_text(section), setup_text(section)])
    return rows


def semantic_sections(board: Board) -> list[Block]:
    """The task's semantic-fidelity table, nothing when no model of it has semantic metrics."""
    rows = semantic_rows(board)
    if not rows:
        return []

    def key(cell: str) -> object:
        head = cell.split(" ", 1)[0].rstrip(",")
        return None if cell == DASH else float(head) if head.replace(".", "", 1).lstrip("-").isdigit() else cell

    body = tuple((name_cell(row[0]), *(Cell(c, key(c)) for c in row[1:])) for row in rows)
    return [para(marked(NOTE)), Table(tuple(HEAD), body, align="l" + "r" * 5 + "l")]
