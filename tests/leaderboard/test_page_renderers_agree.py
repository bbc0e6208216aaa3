"""LEADERBOARD.md and the site lay out the same page records: every table of the index and the task pages, with
the same column titles and the same number of rows, in both outputs, and so do both renderers of a model page and
a comparison page (which LEADERBOARD.md does not hold); the index answers first (the leaders table before the
definitions); a board with nothing ranked says so in one line with the command that ranks it."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.leaderboard.comparison_page import compare_page, comparisons
from longctx_eval.leaderboard.markdown import page_markdown
from longctx_eval.leaderboard.markdown_escape import md_plain
from longctx_eval.leaderboard.model_page import model_page
from longctx_eval.leaderboard.pages import BoardInput
from longctx_eval.leaderboard.site_html import Links, page_html
from longctx_eval.results import read_run
from longctx_eval.scoring.paired_scores import SampleScore

BOARD = Path(__file__).resolve().parents[2] / "leaderboards"


class _Tables(HTMLParser):
    """The tables of an HTML page: per table its column titles and its body and foot row count."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[tuple[str, ...], int]] = []
        self._head: list[str] | None = None
        self._rows = 0
        self._in_th = False
        self._in_body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._head, self._rows = [], 0
        elif tag == "th" and self._head is not None and not self._in_body:
            self._in_th = True
            self._head.append("")
        elif tag in ("tbody", "tfoot"):
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._rows += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "th":
            self._in_th = False
        elif tag == "table" and self._head is not None:
            self.tables.append((tuple(self._head), self._rows))
            self._head, self._in_body = None, False

    def handle_data(self, data: str) -> None:
        if self._in_th and self._head is not None:
            self._head[-1] += data


def _markdown_tables(text: str) -> list[tuple[tuple[str, ...], int]]:
    found: list[tuple[tuple[str, ...], int]] = []
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            head = tuple(md_plain(c.strip()) for c in re.split(r"(?<!\\)\|", block[0].strip())[1:-1])
            found.append((head, len(block) - 2))
            block = []
    return found


def _html_tables(page: Path | str) -> list[tuple[tuple[str, ...], int]]:
    parser = _Tables()
    parser.feed(page if isinstance(page, str) else page.read_text())
    return parser.tables


def test_markdown_and_site_show_the_same_tables(tmp_path: Path) -> None:
    """Every committed run copy: the tables of LEADERBOARD.md are exactly those of index.html and the task pages."""
    runs = tmp_path / "runs"
    shutil.copytree(BOARD / "runs", runs)
    update_leaderboard([runs], tmp_path / "board", site=tmp_path / "site")
    markdown = _markdown_tables((tmp_path / "board" / "LEADERBOARD.md").read_text())
    site = tmp_path / "site"
    html = [t for p in [site / "index.html", *sorted(site.glob("task-*.html"))] for t in _html_tables(p)]
    assert len(markdown) > 20
    assert sorted(markdown) == sorted(html)
    models = next(head for head, _ in markdown if head[:2] == ("model", "spec"))
    assert models[-1] == "run file" and "tasks" in models and "dtype" in models  # one Models table, 11 columns
    text = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    assert text.index("## Leaders") < text.index("## Definitions") and text.rstrip().endswith(".")
    index = (site / "index.html").read_text()
    assert index.index("<h2>Leaders</h2>") < index.index('<details class="definitions">')


def test_nothing_ranked_says_why_and_how(tmp_path: Path) -> None:
    """One model on its own ranks nothing: the index says why in one line and names the command that ranks."""
    one = sorted((BOARD / "runs").glob("*.json"))[0]
    update_leaderboard([one], tmp_path / "board", site=tmp_path / "site")
    text = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    line = next(line for line in text.splitlines() if line.startswith("Nothing is ranked yet"))
    assert "`longctx-eval run --model A,B --tasks TASK" in line
    assert "Nothing is ranked yet" in (tmp_path / "site" / "index.html").read_text()


def test_model_and_comparison_pages_agree_in_both_renderers() -> None:
    """A model page (a committed run copy) and a comparison page (two models' paired scores on one board): the
    same tables, columns and rows whichever renderer lays them out; the statistics sit in the page records."""
    runs = [read_run(p) for p in sorted((BOARD / "runs").glob("*.json"))]
    entry = next(r for r in runs if r.model.name == "smollm2-135m")
    board = BoardInput([entry], "now")
    links = Links({}, {}, {}, {})
    page = model_page(entry, board)
    markdown, html = _markdown_tables(page_markdown(page)), _html_tables(page_html(page, links))
    assert len(markdown) >= 2 + len(entry.tasks) and markdown == html
    assert ("task", "primary metric, all lengths", "lengths", "planned", "evaluated", "over window", "failed") in [
        head for head, _ in markdown
    ]
    task = entry.tasks[0].name

    def scores(values: list[float]) -> dict[tuple[str, str], SampleScore]:
        length = entry.tasks[0].lengths[0]
        return {(f"s{i}", "ctx"): SampleScore(length=length, scores={"score": v}) for i, v in enumerate(values)}

    samples = {"A": {task: scores([1.0] * 8 + [0.0] * 2)}, "B": {task: scores([0.0] * 6 + [1.0] * 4)}}
    found = comparisons(
        [entry.model_copy(update={"model": entry.model.model_copy(update={"name": n})}) for n in ("A", "B")], samples
    )
    assert list(found) == [("A", "B")]
    page = compare_page("A", "B", found[("A", "B")])
    markdown, html = _markdown_tables(page_markdown(page)), _html_tables(page_html(page, links))
    assert markdown == html and markdown[0][0][:4] == ("task", "score", "pairs", "A - B, all lengths")
    assert markdown[1][0][:4] == ("length", "pairs", "A", "B") and markdown[1][1] >= 1


def test_nothing_ranked_for_want_of_samples_says_so(tmp_path: Path) -> None:
    """Two models on the same tasks with fewer than min n samples (a --limit run): the line says samples are
    missing, not a second model, and names the commands that rank (no --limit, or a lower --min-n)."""
    runs = [sorted((BOARD / "runs").glob(f"{m}__*.json"))[-1] for m in ("bm25", "minilm")]
    update_leaderboard(runs, tmp_path / "board", min_n=1000)
    text = (tmp_path / "board" / "LEADERBOARD.md").read_text()
    line = next(line for line in text.splitlines() if line.startswith("Nothing is ranked yet"))
    assert "fewer than 1000 samples" in line and "`--limit`" in line
    command = line.split("`longctx-eval leaderboard --min-n ", 1)[1].split("`", 1)[0]
    update_leaderboard(runs, tmp_path / "ranked", min_n=int(command))  # the command it names does rank
    assert "Nothing is ranked yet" not in (tmp_path / "ranked" / "LEADERBOARD.md").read_text()
