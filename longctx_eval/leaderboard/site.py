"""`leaderboard --site DIR`: the merged board as a static website (plain HTML, one CSS and one script file).

Pages are flat in DIR (index.html, task-*.html, model-*.html) beside plots/ and runs/, and link each other
with relative links only, so a file:// copy and any static host show the same site; nothing is fetched from
the network. The index and task pages are the board's page records (`leaderboard/pages.py`), laid out by
`site_html.py`; this module writes the files and adds the site's own pages (models, comparisons).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from html import escape
from pathlib import Path

from longctx_eval.atomic_io import atomic_write_bytes, atomic_write_text
from longctx_eval.leaderboard.board_table import failed_cell, format_state
from longctx_eval.leaderboard.breakdowns import DEFAULT_MIN_N
from longctx_eval.leaderboard.grid import cell, expected_samples, primary_metric, task_names, task_of
from longctx_eval.leaderboard.length_args import length_args_text
from longctx_eval.leaderboard.merge import MergeNote
from longctx_eval.leaderboard.model_facts import context_window_text, format_params
from longctx_eval.leaderboard.pages import BoardInput, board_pages, skipped_blocks
from longctx_eval.leaderboard.site_html import INDEX, Links, blocks_html, page, page_html
from longctx_eval.leaderboard.site_html import HtmlCell as Cell
from longctx_eval.leaderboard.site_html import _table as _table
from longctx_eval.metrics.bootstrap import MIN_N_FOR_INTERVAL
from longctx_eval.metrics.cluster_stats import count_text
from longctx_eval.results import Coverage, LatencyStats, RunResult, TaskResult, strata_coverage, task_failed
from longctx_eval.scoring.comparison import holm_rows, is_significant, p_text
from longctx_eval.scoring.labels import DASH, length_label
from longctx_eval.scoring.paired_scores import Join, PairedDifference, PairKey, SampleScore, join, paired_differences
from longctx_eval.scoring.paired_tests import TESTS

ASSETS = ("site.css", "site.js")
"""The site's static files, shipped beside this module as site.css / site.js."""


@dataclass(frozen=True)
class SiteInput:
    """What the site shows: merged entries, when, the plots (task -> PNG paths), run copies (model -> path)."""

    entries: Sequence[RunResult]
    updated: str
    plots: Mapping[str, Sequence[Path]]
    run_files: Mapping[str, Path]
    notes: Sequence[MergeNote] = ()
    unread: Sequence[tuple[str, str]] = ()
    samples: Mapping[str, Mapping[str, Mapping[PairKey, SampleScore]]] = field(default_factory=dict)
    """Per model name and board: its per-sample scores (from run folders' scores/), for the comparison pages."""
    min_n: int = DEFAULT_MIN_N
    """Cells with fewer samples are marked low n and never ranked or sorted on."""


def write_site(site: SiteInput, out: Path) -> list[Path]:
    """Write the static site into `out` (created); returns the files written. Stale pages and plots go."""
    out = Path(out)
    tasks = task_names(site.entries)
    task_pages = unique_pages("task", tasks)
    model_pages = unique_pages("model", [e.model.name for e in site.entries])
    written: list[Path] = []
    for asset in ASSETS:
        source = Path(__file__).with_name("site." + asset.rsplit(".", 1)[1])
        written.append(_write(out / asset, source.read_bytes()))
    plot_links: dict[str, list[str]] = {}
    for task, paths in site.plots.items():
        for path in paths:
            written.append(_write(out / "plots" / path.name, path.read_bytes()))
            plot_links.setdefault(task, []).append(f"plots/{path.name}")
    run_links = {}
    for name, path in site.run_files.items():
        written.append(_write(out / "runs" / path.name, path.read_bytes()))
        run_links[name] = f"runs/{path.name}"
    pairs = comparisons(site)
    compare_pages = {
        (a, b): f"compare-{model_pages[a].removeprefix('model-').removesuffix('.html')}--"
        f"{model_pages[b].removeprefix('model-')}"
        for a, b in pairs
    }
    links = Links(task_pages, model_pages, plot_links, run_links, compare_pages)
    for (a, b), boards in pairs.items():
        written.append(_text(out / compare_pages[(a, b)], compare_page(a, b, boards, links)))
    shown = BoardInput(
        site.entries, site.updated, plot_links, run_links, site.notes, site.unread, site.min_n, site.samples
    )
    board = board_pages(shown)
    written.append(_text(out / INDEX, page_html(board.index, links, _comparison_list(links, None))))
    for task, task_page in board.tasks.items():
        written.append(_text(out / task_pages[task], page_html(task_page, links)))
    for entry in site.entries:
        written.append(_text(out / model_pages[entry.model.name], model_page(entry, site, links)))
    _remove_stale(out, set(written))
    return written


def unique_pages(prefix: str, names: Sequence[str]) -> dict[str, str]:
    """'prefix-<slug>.html' per name; names whose slugs collide get '-2', '-3' ... in sorted-name order."""
    pages: dict[str, str] = {}
    used: set[str] = set()
    for name in sorted(set(names)):
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.").lower() or "unnamed"
        candidate, i = slug, 2
        while candidate in used:
            candidate, i = f"{slug}-{i}", i + 1
        used.add(candidate)
        pages[name] = f"{prefix}-{candidate}.html"
    return pages


def model_page(entry: RunResult, site: SiteInput, links: Links) -> str:
    """model-*.html: spec, identity and hashes, settings, environment, per task coverage, serving and skips."""
    m = entry.model
    parts = [f"<h1>{escape(m.name)}</h1>"]
    facts = [
        ("spec", m.spec),
        ("kind", m.kind),
        # A local model's revision is the folder it was loaded from (its identity is the weights' sha256).
        ("loaded from" if m.revision and m.revision.startswith("/") else "revision", m.revision),
        ("params", format_params(m.params) if m.params is not None else None),
        ("dtype", m.dtype),
        ("tokenizer", m.tokenizer),
        ("context window", context_window_text(m)),
        ("capabilities", ", ".join(m.capabilities)),
        ("identity sha256", m.identity_sha256),
        ("weights sha256", m.sha256),
        ("tokenizer sha256", m.tokenizer_sha256),
        ("chat template sha256", m.chat_template_sha256),
        ("suite", entry.suite.version + (f" @ {entry.suite.git}" if entry.suite.git else "")),
        ("run started", entry.started),
        ("run config hash", entry.config_hash),
        ("python", entry.environment.python),
        ("torch", entry.environment.torch),
        ("transformers", entry.environment.transformers),
        ("platform", entry.environment.platform),
    ]
    rows = "".join(f'<tr><th scope="row">{escape(k)}</th><td>{escape(v)}</td></tr>' for k, v in facts if v)
    parts.append(f'<table class="facts">{rows}</table>')
    if entry.model.name in links.runs:
        parts.append(f'<p>Run file: <a href="{escape(links.runs[entry.model.name])}">json</a>.</p>')
    parts += ["<h2>Settings</h2>", f"<pre>{escape(json.dumps(m.settings, indent=2, sort_keys=True))}</pre>"]
    tasks = sorted(entry.tasks, key=lambda t: (t.name, t.capability))
    parts += ["<h2>Coverage</h2>", _coverage_table(tasks, entry, site, links), "<h2>Tasks</h2>"]
    for result in tasks:
        parts += _task_details(result, entry, site, links)
    parts += ["<h2>Skipped</h2>", *blocks_html(skipped_blocks([entry]), links, 3)]
    parts += _comparison_list(links, m.name)
    return page(f"{m.name} · longctx-eval", "\n".join(parts))


Comparison = dict[str, tuple[str, Join, list[PairedDifference]]]
"""Per board: the primary score field compared, the join (pairs, refused and unpaired ids) and its paired
differences (per length, then pooled; none when nothing could be paired)."""


def comparisons(site: SiteInput) -> dict[tuple[str, str], Comparison]:
    """Every pair of models (names sorted) with samples in common on some board, and their differences."""
    names = sorted(name for name in site.samples if site.samples[name])
    out: dict[tuple[str, str], Comparison] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            found: Comparison = {}
            for board in task_names(site.entries):
                sa, sb = site.samples[a].get(board), site.samples[b].get(board)
                metric = primary_metric(board, site.entries)
                if sa and sb and metric:
                    joined = join(sa, sb, metric)  # as `compare`: its refused and unpaired ids are counted
                    diffs = paired_differences(sa, sb, metric, pairs=joined.pairs)
                    if diffs or joined.refused:
                        found[board] = (metric, joined, diffs)
            if any(diffs for _, _, diffs in found.values()):  # a page for models that share some pair
                out[(a, b)] = found
    return out


def compare_page(a: str, b: str, boards: Comparison, links: Links) -> str:
    """compare-*.html: per task, A - B of the primary score on the samples both scored, per length and pooled."""
    parts = [
        f"<h1>{_model_link(a, links)} vs {_model_link(b, links)}</h1>",
        f"<p>Paired differences ({escape(a)} minus {escape(b)}) of each task's primary score, over the samples "
        "both models scored with the same context (same sample id and the same haystack: a sample built in "
        "another tokenizer is never paired). Pairs: how many, and over how many clusters (the haystacks or "
        "documents they were built from) when they share some. Interval: 95% percentile bootstrap over the "
        "clusters, then the pairs within them (2000 resamples, seeded; none under "
        f"{MIN_N_FOR_INTERVAL} pairs or from one cluster). p: the paired test's two-sided p-value, the test named "
        "per row (a sign-flip test of the per-cluster summed differences where pairs share clusters; else "
        "McNemar's exact test for 0/1 scores, a sign-flip permutation test otherwise); Holm p: adjusted by "
        "Holm's correction across every cell of this page "
        "(a one-length task's pooled row repeats its cell); <strong>significant</strong> when Holm p &lt; 0.05, "
        "as `longctx-eval compare` decides. Better: samples where one scored higher.</p>",
    ]
    head = ["length", "pairs", f"{a}", f"{b}", "difference", "significant", f"{a} better", f"{b} better"]
    head += ["test", "p", "Holm p"]
    adjusted = dict(zip(boards, holm_rows([diffs for _, _, diffs in boards.values()]), strict=True))
    for board, (metric, joined, diffs) in boards.items():
        link = f'<a href="{links.tasks[board]}">{escape(board)}</a>' if board in links.tasks else escape(board)
        parts.append(f"<h2>{link}</h2><p>Score: <code>{escape(metric)}</code>. {escape(join_counts(joined, a, b))}</p>")
        if not diffs:
            continue
        parts.append(f"<p>{escape(tests_used(diffs))}</p>")
        rows = [
            [
                (escape(length_label(d.length)), d.length if d.length is not None else float("inf")),
                (escape(f"{d.n}{_over_clusters(d)}"), d.n),
                (f"{d.mean_a:.3f}", d.mean_a),
                (f"{d.mean_b:.3f}", d.mean_b),
                (escape(f"{d.difference:+.3f} {pair_interval(d)}"), d.difference),
                ("yes" if is_significant(holm_p) else "no", int(is_significant(holm_p))),
                (str(d.a_better), d.a_better),
                (str(d.b_better), d.b_better),
                (escape(d.test), d.test),
                (p_text(d.p_value), d.p_value),
                (p_text(holm_p), holm_p),
            ]
            for d, holm_p in zip(diffs, adjusted[board], strict=True)
        ]
        parts.append(_table(head, rows, "compare"))
    return page(f"{a} vs {b} · longctx-eval", "\n".join(parts))


def _over_clusters(d: PairedDifference) -> str:
    """' over 2 clusters' when a comparison row's pairs share clusters, else ''."""
    shared = d.clusters is not None and d.clusters < d.n
    return f" over {count_text(d.clusters or 0)}" if shared else ""


def join_counts(joined: Join, a: str, b: str) -> str:
    """What `longctx-eval compare` prints of a join: '40 pairs; 2 refused: <why>; unpaired: 3 only in A, 0 only
    in B' (ids of another design are refused, never paired; unpaired ids were scored by one model only)."""
    refused = "; ".join(f"{n} refused: {why}" for why, n in joined.refused.items()) or "0 refused"
    pairs = f"{len(joined.pairs)} pairs" if joined.pairs else "no pair"
    return f"{pairs}; {refused}; unpaired: {joined.only_a} only in {a}, {joined.only_b} only in {b}."


def tests_used(diffs: Sequence[PairedDifference]) -> str:
    """The paired tests a board's rows used (each row names its own in the test column), each defined."""
    used = dict.fromkeys(d.test for d in diffs)
    return "Test per length: " + "; ".join(f"{t} = {TESTS.get(t, t)}" for t in used) + "."


def pair_interval(d: PairedDifference) -> str:
    """A row's interval, never one from fewer than MIN_N_FOR_INTERVAL pairs (then the no-interval text)."""
    return (d if d.n >= MIN_N_FOR_INTERVAL else replace(d, ci95=None)).interval_text()


def _comparison_list(links: Links, model: str | None) -> list[str]:
    pairs = [(pair, name) for pair, name in links.compare.items() if model is None or model in pair]
    if not pairs:
        return []
    items = "".join(f'<li><a href="{name}">{escape(a)} vs {escape(b)}</a></li>' for (a, b), name in sorted(pairs))
    return ["<h2>Comparisons</h2>", "<p>Paired differences on the samples both models scored.</p>", f"<ul>{items}</ul>"]


def _board_name(result: TaskResult, entry: RunResult, site: SiteInput) -> str:
    return next((b for b in task_names(site.entries) if task_of(entry, b) is result), result.name)


def _task_link(board: str, links: Links) -> str:
    return f'<a href="{links.tasks[board]}">{escape(board)}</a>' if board in links.tasks else escape(board)


def _coverage_table(tasks: Sequence[TaskResult], entry: RunResult, site: SiteInput, links: Links) -> str:
    """One row per task: planned, evaluated, over-window and failed samples, and the pooled primary metric."""
    rows: list[list[Cell]] = []
    for result in tasks:
        board = _board_name(result, entry, site)
        metric = primary_metric(board, site.entries)
        strata = strata_coverage(result.coverage)

        def unrun(strata: Sequence[Coverage] = strata, result: TaskResult = result) -> bool:
            return sum(c.evaluated + c.over_length + c.failed for c in strata) < expected_samples(result, strata)

        planned = sum(c.planned for c in strata) if strata else None
        evaluated = sum(c.evaluated for c in strata) if strata else result.n_samples - result.over_length
        pooled = cell(result, metric, None, None) if metric else None
        if task_failed(result):
            text, key, mark = failed_cell(result), None, "failed"
        elif pooled is not None:
            value = pooled.row.value if pooled.state == "value" and pooled.row is not None else None
            text, key, mark = format_state(pooled), value, "partial" if pooled.partial else ""
        else:
            text, key, mark = DASH, None, ""
        rows.append(
            [
                (_task_link(board, links), board),
                (escape(", ".join(length_label(n) for n in result.lengths or [])), min(result.lengths or [0])),
                (DASH if planned is None else str(planned), planned),
                (str(evaluated), evaluated, "partial" if planned is not None and unrun() else ""),
                (str(result.over_length), result.over_length),
                (str(result.errors), result.errors, "failed" if result.errors else ""),
                (escape((f"{metric}: " if metric else "") + text), key, mark),
            ]
        )
    head = ["task", "lengths", "planned", "evaluated", "over window", "failed", "primary metric, all lengths"]
    return _table(head, rows, "coverage")


def _task_details(result: TaskResult, entry: RunResult, site: SiteInput, links: Links) -> list[str]:
    board = _board_name(result, entry, site)
    state = " (failed: every request failed)" if task_failed(result) else ""
    parts = [f"<h3>{_task_link(board, links)}{escape(state)}</h3>"]
    facts = [
        ("version", result.version),
        ("capability", result.capability),
        ("samples", f"{result.n_samples} ({result.over_length} over-length, {result.errors} failed)"),
        ("lengths", ", ".join(length_label(n) for n in result.lengths or [])),
        ("limit", str(result.limit) if result.limit is not None else None),
        ("seed", str(result.seed) if result.seed is not None else None),
        ("args", json.dumps(result.args, sort_keys=True) if result.args else None),
        ("args by length", length_args_text(result) or None),
        ("started", result.started),
        ("dataset sha256", result.dataset_hash),
        ("config hash", result.config_hash),
        ("scorer sha256", result.scorer_sha256),
        (
            "throughput",
            f"{result.throughput.samples_per_s:.3g} samples/s, {result.throughput.prompt_tokens_per_s:,.0f} prompt "
            f"tokens/s over {result.throughput.seconds:.1f} s",
        ),
    ]
    rows = "".join(f'<tr><th scope="row">{escape(k)}</th><td>{escape(v)}</td></tr>' for k, v in facts if v)
    parts.append(f'<table class="facts">{rows}</table>')
    if result.coverage:
        cov: list[list[Cell]] = [
            [
                (length_label(c.length), c.length),
                (DASH if c.depth is None else f"{c.depth:g}", c.depth),
                (str(c.planned), c.planned),
                (
                    str(c.evaluated),
                    c.evaluated,
                    "partial" if c.evaluated + c.over_length + c.failed < expected_samples(result, [c]) else "",
                ),
                (str(c.over_length), c.over_length),
                (str(c.failed), c.failed, "failed" if c.failed else ""),
            ]
            for c in sorted(
                strata_coverage(result.coverage), key=lambda c: (c.length, -1.0 if c.depth is None else c.depth)
            )
        ]
        table = _table(["length", "depth", "planned", "evaluated", "over window", "failed"], cov, "coverage")
        parts.append(f"<details><summary>Coverage per stratum ({len(cov)})</summary>{table}</details>")
    parts += _failures([(entry.model.name, result)])
    if result.serving is not None:
        parts += _serving(result)
    return parts


def _serving(result: TaskResult) -> list[str]:
    s = result.serving
    assert s is not None
    head = ["latency", "n", "mean", "P50", "P95", "P99"]
    rows = []
    named: list[tuple[str, LatencyStats | None]] = [
        ("first token (s)", s.ttft_s),
        ("last token, end to end (s)", s.e2e_s),
        ("inter-token (s)", s.itl_s),
        ("per output token (s)", s.tpot_s),
        ("output tokens/s per request", s.output_tokens_per_s),
    ]
    for label, stats in named:
        if stats is not None:
            rows.append(
                [
                    (escape(label), label),
                    (str(stats.n), stats.n),
                    *((f"{v:.4g}", v) for v in (stats.mean, stats.p50, stats.p95, stats.p99)),
                ]
            )
    t = s.throughput
    agg = ", ".join(
        f"{label} {v:.4g}"
        for label, v in (
            ("requests/s", t.requests_per_s),
            ("output tokens/s", t.output_tokens_per_s),
            ("total tokens/s", t.total_tokens_per_s),
        )
        if v is not None
    )
    retries = ", ".join(f"{k} {v}" for k, v in sorted(s.retries_by_reason.items())) or "none"
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(s.failure_kinds.items()))
    text = (
        f"Serving: {s.requests} requests, {s.ok} ok, {s.failed} failed{f' ({kinds})' if kinds else ''}, "
        f"{s.retries} retries ({retries}); "
        f"aggregate {agg or DASH} over {s.wall_s:.2f} s; prompt lengths checked {s.length_checked}, "
        f"{s.length_mismatches} mismatched."
    )
    return [f"<p>{escape(text)}</p>", _table(head, rows, "serving") if rows else ""]


def _failures(board: Sequence[tuple[str, TaskResult]]) -> list[str]:
    items = [
        f"<li>{escape(name)}: " + "; ".join(f"{escape(reason)} ({n})" for reason, n in t.failures.items()) + "</li>"
        for name, t in board
        if t.failures
    ]
    if not items:
        return []
    return ['<p>Why requests failed (not scored; a rerun retries them):</p><ul class="failures">', *items, "</ul>"]


def _model_link(name: str, links: Links) -> str:
    page_name = links.models.get(name)
    return f'<a href="{page_name}">{escape(name)}</a>' if page_name else escape(name)


def _write(path: Path, data: bytes) -> Path:
    if not path.is_file() or path.read_bytes() != data:
        atomic_write_bytes(path, data)
    return path


def _text(path: Path, text: str) -> Path:
    atomic_write_text(path, text)
    return path


def _remove_stale(out: Path, keep: set[Path]) -> None:
    """Remove pages, plots and run copies of an earlier build of this site that the new one no longer has."""
    stale = [
        *out.glob("task-*.html"),
        *out.glob("model-*.html"),
        *out.glob("compare-*.html"),
        *out.glob("plots/*.png"),
        *out.glob("runs/*.json"),
    ]
    for path in stale:
        if path not in keep and path.is_file() and not path.is_symlink():
            path.unlink()
    if (out / "plots").is_dir() and not any((out / "plots").iterdir()):
        shutil.rmtree(out / "plots")
