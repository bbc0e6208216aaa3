"""`leaderboard --site DIR`: the merged board as a static website (plain HTML, one CSS and one script file).

Pages are flat in DIR (index.html, task-*.html, model-*.html, compare-*.html) beside plots/ and runs/, and link
each other with relative links only, so a file:// copy and any static host show the same site; nothing is fetched
from the network. Every page is a page-model record (`leaderboard/site_pages.py`), laid out by `site_html.py`;
this module names the files, copies plots and run files, and writes the pages.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from longctx_eval.atomic_io import atomic_write_bytes, atomic_write_text
from longctx_eval.leaderboard.breakdowns import DEFAULT_MIN_N
from longctx_eval.leaderboard.grid import task_names
from longctx_eval.leaderboard.merge import MergeNote
from longctx_eval.leaderboard.pages import BoardInput
from longctx_eval.leaderboard.site_html import INDEX, Links, page_html
from longctx_eval.leaderboard.site_pages import site_pages
from longctx_eval.results import RunResult
from longctx_eval.scoring.paired_scores import PairKey, SampleScore

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
    shown = BoardInput(
        site.entries, site.updated, plot_links, run_links, site.notes, site.unread, site.min_n, site.samples
    )
    pages = site_pages(shown)
    compare_pages = {
        (a, b): f"compare-{model_pages[a].removeprefix('model-').removesuffix('.html')}--"
        f"{model_pages[b].removeprefix('model-')}"
        for a, b in pages.comparisons
    }
    links = Links(task_pages, model_pages, plot_links, run_links, compare_pages)
    written.append(_text(out / INDEX, page_html(pages.board.index, links)))
    for task, task_page in pages.board.tasks.items():
        written.append(_text(out / task_pages[task], page_html(task_page, links)))
    for name, model_page in pages.models.items():
        written.append(_text(out / model_pages[name], page_html(model_page, links)))
    for pair, compare_page in pages.comparisons.items():
        written.append(_text(out / compare_pages[pair], page_html(compare_page, links)))
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
