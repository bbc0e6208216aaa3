"""The one Markdown escaping rule for values from run files, specs and task arguments (names, reasons, paths),
and its inverse, with which the site shows the board's Markdown blocks as HTML.

`md_text(value)` renders, under CommonMark and GitHub's Markdown (tables, strikethrough), as exactly the value's
text on one line: runs of whitespace (newlines too) become one space; `&`, `<`, `>` and `"` become HTML character
references, so no tag, attribute or entity of a value survives; `\\`, `|`, `*`, `` ` ``, `[`, `]` and `~` are
backslash-escaped, and so is `_` except inside a word (where CommonMark never reads it as emphasis), so no table
cell, emphasis, code span, link or strikethrough starts or ends inside a value. Only values are escaped: the
renderers' own Markdown (`**bold**`, code spans, `[lo, hi]` intervals) is written as it is.
"""

from __future__ import annotations

import re
from html import escape

_REFERENCES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_CHARACTERS = {reference: character for character, reference in _REFERENCES.items()}
_SPECIAL = re.compile(r'[&<>"\\|*`\[\]~]|_+')
_CODE_SAFE = re.compile(r"[A-Za-z0-9 _.,:;/@=+?%#()-]+")
"""Values made only of these characters are shown as code spans, where nothing needs escaping."""
_TOKEN = re.compile(r"\\([!-/:-@\[-`{-~])|&(?:amp|lt|gt|quot);|`([^`]*)`|\*\*")
"""In the board's Markdown: a backslash escape, one of md_text's references, a code span, a bold marker."""


def md_text(value: object) -> str:
    """`value` as Markdown text that shows exactly its text (whitespace runs as one space) and nothing live."""
    text = " ".join(str(value).split())

    def one(match: re.Match[str]) -> str:
        found = match.group()
        if found[0] != "_":
            return _REFERENCES.get(found) or "\\" + found
        start, end = match.start(), match.end()
        in_word = start > 0 and end < len(text) and text[start - 1].isalnum() and text[end].isalnum()
        return found if in_word else "\\_" * len(found)

    return _SPECIAL.sub(one, text)


def md_code(value: str) -> str:
    """`value` as a code span when it needs no escaping there (metric names, plain specs), else as `md_text`."""
    text = " ".join(value.split())
    return f"`{text}`" if _CODE_SAFE.fullmatch(text) else md_text(text)


def md_plain(markdown: str) -> str:
    """The text a line of the board's Markdown shows: escapes and references undone, code and bold markers
    dropped (the site's sort keys and column titles)."""
    return "".join(_pieces(markdown, html=False))


def md_html(markdown: str) -> str:
    """A line of the board's Markdown as HTML: text escaped, code spans and bold spans rendered; a bold marker
    without its pair stays text."""
    return "".join(_pieces(markdown, html=True))


def _pieces(markdown: str, *, html: bool) -> list[str]:
    out: list[str] = []
    opened: int | None = None  # index in `out` of the <strong> still open
    pos = 0
    for match in _TOKEN.finditer(markdown):
        out.append(_text(markdown[pos : match.start()], html))
        pos = match.end()
        token = match.group()
        if match.group(1) is not None:
            out.append(_text(match.group(1), html))
        elif token.startswith("&"):
            out.append(token if html else _CHARACTERS[token])
        elif match.group(2) is not None:
            out.append(f"<code>{escape(match.group(2))}</code>" if html else match.group(2))
        elif not html:
            continue
        elif opened is None:
            opened = len(out)
            out.append("<strong>")
        else:
            out.append("</strong>")
            opened = None
    out.append(_text(markdown[pos:], html))
    if opened is not None:
        out[opened] = "**"
    return out


def _text(text: str, html: bool) -> str:
    return escape(text) if html else text
