"""CoNLL-2012 (OntoNotes), LitBank and OntoGUM-upstream coreference files: an exact reader and a writer.

The reader follows the official scorer v8.01 where it is lenient on purpose (columns split on TAB with
trailing empty fields dropped, the coreference column is the last one, brackets parsed as one-token
marks first, then opens, then closes, `(N+M)` double antecedents discarded) and is strict where the
scorer silently misreads a file: unbalanced brackets, a changing field count inside a sentence, a missing
`#end document`, a repeated document name or an unparsable coreference field are errors naming the file,
the line and the problem. Mentions are inclusive token spans, tokens counted over the document's
non-blank lines, exactly as the scorer counts them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from longctx_eval.errors import DataError

Span = tuple[int, int]

_BEGIN = re.compile(r"^#\s*begin document (.*?)$")
_END = re.compile(r"^#\s*end document")
_DOUBLE = re.compile(r"\((\d+\+\d)\)")
_SINGLE = re.compile(r"\((\d+)\)")
_OPEN = re.compile(r"\((\d+)")
_CLOSE = re.compile(r"(\d+)\)")
_LEFTOVER_OK = re.compile(r"^[|\-_\s]*$")
_BRACKET_ID = re.compile(r"\(([^()|]*)\)?|([^()|]*)\)")  # the id in (N), (N or N)
_ID_OK = re.compile(r"^\d+(?:\+\d+)?$")
_NAME_ID = re.compile(r"^\((.*)\); part (\S+)$")


@dataclass(frozen=True)
class CorefDocument:
    """One document (or document part): its words, sentence breaks and gold clusters of inclusive spans."""

    name: str  # everything after "#begin document ", e.g. "(GUM_bio_byron); part 000"
    tokens: tuple[str, ...]
    sentence_ends: tuple[int, ...]  # exclusive token index where each sentence ends
    clusters: tuple[tuple[Span, ...], ...]  # entity order and mention order as the official scorer reads them
    path: str = ""
    line: int = 0  # line of the "#begin document" header
    pos: tuple[str, ...] | None = None
    speakers: tuple[str, ...] | None = None

    @property
    def doc_id(self) -> str:
        """The short id: "GUM_bio_byron" for "(GUM_bio_byron); part 000", else the whole name."""
        m = _NAME_ID.match(self.name)
        return m.group(1) if m else self.name

    @property
    def n_mentions(self) -> int:
        """Number of mentions over all clusters (a span repeated in two clusters counts twice)."""
        return sum(len(c) for c in self.clusters)


class _DocBuilder:
    """Accumulates one document's lines; mirrors the scorer's bracket rules."""

    def __init__(self, name: str, path: str, line: int) -> None:
        self.name, self.path, self.line = name, path, line
        self.tokens: list[str] = []
        self.pos: list[str] = []
        self.speakers: list[str] = []
        self.sentence_ends: list[int] = []
        self.entities: dict[str, int] = {}  # file id -> entity index, in first-seen order (the scorer's GetIndex)
        self.clusters: list[list[Span]] = []
        self.open: dict[str, list[tuple[int, int]]] = {}  # file id -> stack of (start token, line)
        self.n_fields: int | None = None

    def where(self, lineno: int) -> str:
        return f"{self.path}:{lineno}"

    def entity(self, eid: str) -> int:
        if eid not in self.entities:
            self.entities[eid] = len(self.clusters)
            self.clusters.append([])
        return self.entities[eid]

    def blank(self) -> None:
        if self.tokens and (not self.sentence_ends or self.sentence_ends[-1] != len(self.tokens)):
            self.sentence_ends.append(len(self.tokens))
        self.n_fields = None

    def token(self, raw: str, lineno: int) -> None:
        fields = raw.split("\t") if "\t" in raw else raw.split()
        if len(fields) < 3:
            raise DataError(
                f"{self.where(lineno)}: token line has {len(fields)} field(s); expected at least 3 "
                "(OntoGUM upstream: index, word, coreference; CoNLL-2012/LitBank: 12-13 TAB-separated fields)"
            )
        if self.n_fields is not None and len(fields) != self.n_fields:
            raise DataError(
                f"{self.where(lineno)}: token line has {len(fields)} fields but the sentence's previous lines have "
                f"{self.n_fields}; expected the same number of fields on every line of a sentence"
            )
        self.n_fields = len(fields)
        word_col = 1 if len(fields) == 3 else 3
        self.tokens.append(fields[word_col])
        self.pos.append(fields[4] if len(fields) >= 12 else "-")
        self.speakers.append(fields[9] if len(fields) >= 12 else "-")
        while fields and fields[-1] == "":  # Perl's split drops trailing empty fields, so does the scorer
            fields.pop()
        self.coref(fields[-1], len(self.tokens) - 1, lineno)

    def coref(self, info: str, tok: int, lineno: int) -> None:
        if info == "_":
            return
        for m in _BRACKET_ID.finditer(info):
            eid = m.group(1) if m.group(1) is not None else m.group(2)
            if not _ID_OK.match(eid):
                raise DataError(
                    f"{self.where(lineno)}: coreference field {info!r}: cluster id {eid!r} is not an integer; "
                    "expected marks like (N, N), (N) with integer N, joined by '|'"
                )
        rest = _consume(_DOUBLE, info, lambda _m: None)
        rest = _consume(_SINGLE, rest, lambda m: self.clusters[self.entity(m.group(1))].append((tok, tok)))
        rest = _consume(_OPEN, rest, lambda m: self._push(m.group(1), tok, lineno))
        rest = _consume(_CLOSE, rest, lambda m: self._pop(m.group(1), tok, lineno))
        if not _LEFTOVER_OK.match(rest):
            raise DataError(
                f"{self.where(lineno)}: coreference field {info!r} is not bracket notation (left over: {rest!r}); "
                "expected marks like (N, N), (N) joined by '|', or '-'/'_' for none"
            )

    def _push(self, eid: str, tok: int, lineno: int) -> None:
        self.entity(eid)
        self.open.setdefault(eid, []).append((tok, lineno))

    def _pop(self, eid: str, tok: int, lineno: int) -> None:
        stack = self.open.get(eid)
        if not stack:
            raise DataError(
                f"{self.where(lineno)}: unbalanced brackets: '{eid})' closes a mention of entity {eid} that was "
                "never opened; expected a matching '(" + eid + "' on this or an earlier token"
            )
        start, _ = stack.pop()
        self.clusters[self.entity(eid)].append((start, tok))

    def finish(self, lineno: int) -> CorefDocument:
        unclosed = [(eid, ln) for eid, stack in self.open.items() for _, ln in stack]
        if unclosed:
            eid, ln = unclosed[0]
            raise DataError(
                f"{self.where(ln)}: unbalanced brackets: '({eid}' opened here is never closed before "
                f"'#end document' at line {lineno} ({len(unclosed)} unclosed in all); expected a matching '{eid})'"
            )
        self.blank()
        return CorefDocument(
            name=self.name,
            tokens=tuple(self.tokens),
            sentence_ends=tuple(self.sentence_ends),
            clusters=tuple(tuple(c) for c in self.clusters if c),
            path=self.path,
            line=self.line,
            pos=tuple(self.pos),
            speakers=tuple(self.speakers),
        )


def _consume(pattern: re.Pattern[str], text: str, action) -> str:  # noqa: ANN001
    """Remove the leftmost match until none is left, acting on each: Perl's `while (s/re//)`."""
    while True:
        m = pattern.search(text)
        if m is None:
            return text
        action(m)
        text = text[: m.start()] + text[m.end() :]


def parse_conll(lines: Iterable[str], path: str = "<string>") -> list[CorefDocument]:
    """Parse the documents of a CoNLL coreference file given as lines; DataError on malformed input."""
    docs: list[CorefDocument] = []
    seen: dict[str, int] = {}
    current: _DocBuilder | None = None
    lineno = 0
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\n").rstrip("\r")
        begin = _BEGIN.match(line)
        if current is None:
            if begin:
                current = _start(begin.group(1), path, lineno, seen)
            elif line.strip() and not line.startswith("#"):
                raise DataError(
                    f"{path}:{lineno}: token line outside a document; expected '#begin document (name); part N' first"
                )
            continue
        if begin:
            raise DataError(
                f"{path}:{lineno}: '#begin document' inside document {current.name!r} (begun at line "
                f"{current.line}); expected '#end document' first"
            )
        if _END.match(line):
            docs.append(current.finish(lineno))
            current = None
        elif not line.strip():
            current.blank()
        else:
            current.token(line, lineno)
    if current is not None:
        raise DataError(
            f"{path}:{lineno}: end of file inside document {current.name!r} (begun at line {current.line}); "
            "expected '#end document'"
        )
    return docs


def _start(name: str, path: str, lineno: int, seen: dict[str, int]) -> _DocBuilder:
    if name in seen:
        raise DataError(
            f"{path}:{lineno}: document name {name!r} repeats the one at line {seen[name]}; expected unique names "
            "(the official scorer would silently score only one of them)"
        )
    seen[name] = lineno
    return _DocBuilder(name, path, lineno)


def read_conll(path: str | Path) -> list[CorefDocument]:
    """Read every document of a CoNLL-2012, LitBank or OntoGUM-upstream file."""
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as fh:
            return parse_conll(fh, str(p))
    except FileNotFoundError:
        raise DataError(f"{p}: no such file; expected a CoNLL coreference file") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{p}: not UTF-8 text ({exc})") from None


def encode_coref_column(n_tokens: int, clusters: Sequence[Sequence[Span]]) -> list[str]:
    """The coreference column of each token for `clusters` (entity k written as id k)."""
    opens: list[list[str]] = [[] for _ in range(n_tokens)]
    closes: list[list[str]] = [[] for _ in range(n_tokens)]
    singles: list[list[str]] = [[] for _ in range(n_tokens)]
    for k, cluster in enumerate(clusters):
        # Longer mentions open first and close last, so nesting inside one entity reads back right.
        for s, e in sorted(cluster, key=lambda m: (m[0], -m[1])):
            if not 0 <= s <= e < n_tokens:
                raise DataError(f"mention {[s, e]} of entity {k} is outside the document's {n_tokens} tokens")
            if s == e:
                singles[s].append(f"({k})")
            else:
                opens[s].append(f"({k}")
                closes[e].insert(0, f"{k})")
    return ["|".join(opens[i] + singles[i] + closes[i]) or "-" for i in range(n_tokens)]


def format_conll(doc: CorefDocument, clusters: Sequence[Sequence[Span]] | None = None) -> str:
    """One document in the 12-column CoNLL-2012 layout, with `clusters` (default: its gold) as coreference."""
    chosen = doc.clusters if clusters is None else clusters
    coref = encode_coref_column(len(doc.tokens), chosen)
    out = [f"#begin document {doc.name}"]
    start = 0
    for end in doc.sentence_ends or (len(doc.tokens),):
        for i in range(start, end):
            pos = doc.pos[i] if doc.pos else "-"
            speaker = doc.speakers[i] if doc.speakers else "-"
            word = doc.tokens[i] or "-"
            out.append(
                "\t".join([doc.doc_id, "0", str(i - start), word, pos, "-", "-", "-", "-", speaker, "*", coref[i]])
            )
        out.append("")
        start = end
    out.append("#end document")
    text = "\n".join(out) + "\n"
    _check_round_trip(doc, chosen, text)
    return text


def _check_round_trip(doc: CorefDocument, clusters: Sequence[Sequence[Span]], text: str) -> None:
    """Bracket notation cannot encode every clustering (e.g. two mentions of one entity sharing a token)."""
    back = parse_conll(text.splitlines(), f"<{doc.name}>")[0].clusters
    want = sorted(sorted(set(c)) for c in clusters if c)
    got = sorted(sorted(set(c)) for c in back)
    if want != got:
        raise DataError(
            f"document {doc.name!r}: these clusters cannot be written in CoNLL bracket notation (mentions of one "
            "entity that overlap without nesting, or that share a boundary token); the official scorer would "
            "read them differently"
        )


def write_conll(path: str | Path, docs: Sequence[CorefDocument], clusters: Sequence | None = None) -> None:
    """Write documents (with `clusters[i]` for document i when given) to one CoNLL-2012 file."""
    parts = [format_conll(d, None if clusters is None else clusters[i]) for i, d in enumerate(docs)]
    Path(path).write_text("".join(parts), encoding="utf-8")
