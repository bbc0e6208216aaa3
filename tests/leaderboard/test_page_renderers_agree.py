"""LEADERBOARD.md and the site lay out the same page records: every table of the index and the task pages, with
the same column titles and the same number of rows, in both outputs; the index answers first (the leaders table
before the definitions); a board with nothing ranked says so in one line with the command that ranks it."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

from longctx_eval.leaderboard.build import update_leaderboard
from longctx_eval.leaderboard.markdown_escape import md_plain

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


def _html_tables(page: Path) -> list[tuple[tuple[str, ...], int]]:
    parser = _Tables()
    parser.feed(page.read_text())
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
