"""Every page of the site as page-model records: the board's pages (`pages.py`), one page per model and one per
pair of models with paired samples (`model_page.py`, `comparison_page.py`), and the comparisons each links to.

Statistics are computed here once; `site.py` only names the files and lays the records out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from longctx_eval.leaderboard.comparison_page import compare_page, comparison_list, comparisons
from longctx_eval.leaderboard.model_page import model_page
from longctx_eval.leaderboard.page_model import Page, Section
from longctx_eval.leaderboard.pages import Board, BoardInput, board_pages


@dataclass(frozen=True)
class SitePages:
    """The board's pages (the index listing the comparisons), the model pages and the comparison pages."""

    board: Board
    models: dict[str, Page]
    comparisons: dict[tuple[str, str], Page]


def site_pages(board: BoardInput) -> SitePages:
    """Every page of the site, each computed once."""
    found = comparisons(board.entries, board.samples or {})
    pairs = list(found)
    pages = board_pages(board)
    index = pages.index
    at = next((i for i, b in enumerate(index.blocks) if isinstance(b, Section) and b.behind), len(index.blocks))
    index = replace(index, blocks=(*index.blocks[:at], *comparison_list(pairs), *index.blocks[at:]))
    models = {e.model.name: model_page(e, board, comparison_list(pairs, e.model.name)) for e in board.entries}
    compared = {(a, b): compare_page(a, b, boards) for (a, b), boards in found.items()}
    return SitePages(replace(pages, index=index), models, compared)
