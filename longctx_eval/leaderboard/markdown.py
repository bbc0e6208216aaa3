"""LEADERBOARD.md: the board's pages (`leaderboard/pages.py`) laid out as one Markdown file.

The index's opening (the leaders) comes first, then each task page as a section, then the index's other sections,
then every definition section once, at the end. Values are escaped with `markdown_escape.md_text`; the board's
own text is written as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from longctx_eval.leaderboard.breakdowns import DEFAULT_MIN_N
from longctx_eval.leaderboard.markdown_escape import md_code, md_text
from longctx_eval.leaderboard.page_model import Block, Bullets, Cell, Figure, Page, Para, Section, Span, Table
from longctx_eval.leaderboard.pages import Board, BoardInput, board_pages
from longctx_eval.leaderboard.significance import Samples

if TYPE_CHECKING:
    from longctx_eval.leaderboard.merge import MergeNote


def render_markdown(
    entries: Sequence,
    updated: str,
    plots: Mapping[str, str | Sequence[str]],
    run_links: Mapping[str, str] | None = None,
    notes: Sequence[MergeNote] = (),
    unread: Sequence[tuple[str, str]] = (),
    min_n: int = DEFAULT_MIN_N,
    samples: Samples | None = None,
) -> str:
    """LEADERBOARD.md of merged entries: `plots` maps task -> relative PNG path(s), the heatmap first; `run_links`
    model name -> relative run-file path; `notes` the merge's notes; `unread` inputs not merged, with why."""
    shown = {task: [p] if isinstance(p, str) else list(p) for task, p in plots.items()}
    board = BoardInput(entries, updated, shown, run_links or {}, notes, unread, min_n, samples)
    return board_markdown(board_pages(board))


def board_markdown(board: Board) -> str:
    """The whole file: the leaders, every task, the index's other sections, the definitions once."""
    index = board.index
    sections = [b for b in index.blocks if isinstance(b, Section) and not b.behind]
    opening = [b for b in index.blocks if not isinstance(b, Section)] + sections[:1]
    lines = [f"# {md_text(index.title)}"]
    behind: list[Section] = [b for b in index.blocks if isinstance(b, Section) and b.behind]
    lines += _blocks(opening, 2)
    for page in board.tasks.values():
        lines += ["", *_page_title(page), *_blocks([b for b in page.blocks if not _is_behind(b)], 3)]
        behind += [b for b in page.blocks if isinstance(b, Section) and b.behind]
    lines += _blocks(sections[1:], 2)
    seen: set[Section] = set()
    for section in behind:
        if section.title not in {s.title for s in seen}:
            seen.add(section)
            lines += _blocks([section], 2)
    return "\n".join(lines) + "\n"


def page_markdown(page: Page) -> str:
    """One page on its own (a model or comparison page, which LEADERBOARD.md does not hold), definitions last."""
    shown = [b for b in page.blocks if not _is_behind(b)]
    lines = [f"# {md_text(page.title)}", *_blocks(shown, 2), *_blocks([b for b in page.blocks if _is_behind(b)], 2)]
    return "\n".join(lines) + "\n"


def _is_behind(block: Block) -> bool:
    return isinstance(block, Section) and block.behind


def _page_title(page: Page) -> list[str]:
    return [f"## {md_text(page.title)}" + (f" {md_text(page.version)}" if page.version else "")]


def _blocks(blocks: Sequence[Block], level: int) -> list[str]:
    """Each block after a blank line."""
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Section):
            lines += ["", f"{'#' * level} {md_text(b.title)}", *_blocks(b.blocks, level + 1)]
        elif isinstance(b, Para):
            lines += ["", paragraph(b)]
        elif isinstance(b, Table):
            lines += ["", *table(b)]
        elif isinstance(b, Bullets):
            lines += ["", *(f"- {paragraph(p)}" for p in b.items)]
        elif isinstance(b, Figure):
            lines += ["", f"![{md_text(b.alt)}]({b.src.target})"]
    return lines


def paragraph(p: Para) -> str:
    """A paragraph on one line."""
    return "".join(span(s) for s in p.spans)


def span(s: Span | Cell) -> str:
    """A span or cell: values escaped, styled, linked where the link is a file (plots, run copies)."""
    if s.style == "code" and not s.own:
        shown = md_code(s.text)
    else:
        shown = s.text if s.own else md_text(s.text)
        mark = {"code": "`", "strong": "**", "em": "*", "": ""}[s.style]
        shown = f"{mark}{shown}{mark}" if shown else shown
    if s.link is not None and s.link.kind in ("plot", "run"):
        shown = f"[{shown}]({s.link.target})"  # a path under runs/ or plots/ made of file-safe characters
    return shown


def table(t: Table) -> list[str]:
    """A pipe table: escaped titles, the alignment row, body rows then foot rows."""
    separator = "|" + "|".join("---:" if a == "r" else "---" for a in t.aligned()) + "|"
    lines = ["| " + " | ".join(md_text(h) for h in t.head) + " |", separator]
    return lines + ["| " + " | ".join(span(c) for c in row) + " |" for row in (*t.rows, *t.foot)]
