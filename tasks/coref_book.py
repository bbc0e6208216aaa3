"""Book-scale coreference on BookCoref (your assembled copy, path=): windows of each length and whole books.

Each book is cut into windows of contiguous whole sentences filling each length (`data_builders/coref/
book_windows.py`); a window is one sample whose cluster is its book, its gold the character chains restricted to
the window's mentions; a book whose text fits a length has no window there. `whole=true` adds each book whole as
one sample (id `<book>@book`) at one length for all of them: the least power of two holding the longest book's
prompt (`whole_length`), longer than every window length with a window. BookCoref annotates characters only:
other entities are not marked, asked or scored.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from data_builders.coref.book_windows import BookCutter
from data_builders.coref.bookcoref import BOOKCOREF_HELP, Book, bookcoref_file, bookcoref_location, read_bookcoref
from data_builders.coref.documents import StretchedDoc
from data_builders.coref.haystack import as_long
from longctx_eval import Sample, Task, Tokenizer, any_of, between, task
from longctx_eval.errors import ConfigError, DataError, TaskUnavailable
from longctx_eval.progress import console

from ._coref import PROTOCOL_BOUNDS, CorefKit, protocol


@task(
    name="coref_book",
    version="1",
    requires=any_of("coref", "loglikelihood", "generate"),
    default_lengths=[32768, 65536, 131072],
    description="BookCoref books (your copy, path=) in windows of each length and whole: CoNLL F1, Span-EM",
    bounds={"per_book": between(0, 100_000), **PROTOCOL_BOUNDS},
)
def coref_book(
    lengths: list[int],
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    path: str | None = None,
    split: str = "test",
    layout: str = "auto",
    whole: bool = False,
    per_book: int = 0,
    batch: int = 10,
    mode: str = "choice",
    asked: int = 20,
    candidates: int = 5,
    window: int = 1024,
) -> Task:
    """`path`: BookCoref's assembled JSONL (file or folder), else $LONGCTX_BOOKCOREF, else the task is skipped.

    `whole`: also each book whole (`whole_length`); `per_book`: windows per book and length, evenly spread (0: all);
    the protocol arguments (`mode`, `asked`, ...) as the other coref tasks (docs/coref.md).
    """
    where = bookcoref_location(path)
    if where is None:
        raise TaskUnavailable(BOOKCOREF_HELP)
    file = bookcoref_file(where, split, layout)
    kit = CorefKit(protocol(mode, asked, candidates, batch, window), tokenizer)
    kit.seed = seed
    return Task(
        dataset=lambda: book_samples(kit, file_books(str(file), layout), lengths, whole, per_book, seed),
        cluster_noun="books",
        **kit.task_parts(),
    )


def file_books(path: str, layout: str) -> list[Book]:
    """The file's records, all of one layout (`auto`: whichever the file holds)."""
    books = read_bookcoref(path)
    kinds = {b.layout for b in books}
    if len(kinds) > 1:
        raise ConfigError(f"path: {path} mixes whole books and split windows; expected one layout per file")
    if layout != "auto" and kinds != {layout}:
        raise ConfigError(f"layout: {layout!r} asked for, but {path} holds the {kinds.pop()} layout")
    return books


def book_samples(
    kit: CorefKit, books: Sequence[Book], lengths: Sequence[int], whole: bool, per_book: int, seed: int
) -> Iterator[Sample]:
    """Per length, each book's windows (evenly spread `per_book` of them, or all); then each book whole if asked.

    A split-layout record (one of BookCoref's own 1,500-word windows) is one document, evaluated whole only.
    """
    split = any(b.layout == "split" for b in books)
    if split and not whole:
        raise ConfigError(
            "whole: the split layout holds 1,500-word windows, each evaluated whole; pass whole=true, or give the "
            "full layout for windows of each length"
        )
    if not split:
        cutters = {b.key: BookCutter(b.document(), kit.tokenizer) for b in books}
        for length in lengths:
            made = 0
            for book in books:
                for s in spread(list(book_windows_fitted(kit, book, cutters[book.key], length, seed)), per_book):
                    made += 1
                    yield s
            short = [b.key for b in books if cutters[b.key].tokens <= length]
            if short:
                console.print(f"coref_book: at {length}, {len(short)} book(s) fit whole (no window; whole=true "
                              "evaluates them whole)", markup=False, highlight=False)  # fmt: skip
            if not made:
                raise DataError(
                    f"coref_book: no book is longer than {length} tokens, so no window fills it; expected a shorter "
                    "length, or whole=true for whole books"
                )
    if whole:
        built = []
        for book in books:
            meta = _meta(book, 0, seed) | {"window": "book", "word_start": 0, "word_end": book.n_words}
            built.append(kit.sample(as_long(book.document()), f"{book.key}@book", True, meta))
        length = whole_length(max(int(s.metadata["prompt_tokens"]) for s in built))
        for s in built:
            yield replace(s, metadata={**s.metadata, "target_tokens": length})


def whole_length(prompt_tokens: int) -> int:
    """The length stratum of whole books: the least power of two (at least 1K) that holds the longest one's prompt."""
    return max(1024, 1 << (prompt_tokens - 1).bit_length())


def book_windows_fitted(kit: CorefKit, book: Book, cut: BookCutter, length: int, seed: int) -> Iterator[Sample]:
    """A book's windows at `length`, each the longest run of sentences whose longest prompt fits the length.

    `kit.fit` searches a target for each window; after the first, a target t asks for t * share tokens of text,
    share being the text's part of the previous window's prompt, so a window usually fits in one or two rounds.
    """
    if cut.tokens <= length:
        return
    i, index, text, share = 0, 0, length, 1.0  # text: the last window's tokens before marks (what a window holds)
    while i < cut.sentences:
        left = cut.remaining(i)
        if index and 2 * left < text:
            return  # a remainder under half a window is left out
        tail = bool(index) and left <= text

        def at(target: int, i: int = i, index: int = index, tail: bool = tail, share: float = share) -> StretchedDoc:
            budget = max(1, int(target * share))
            s, e = (cut.backward(cut.sentences, budget, exact=False), cut.sentences) if tail else (
                i, cut.forward(i, budget, exact=False))  # fmt: skip
            w = cut.window(index, s, e)
            meta = _meta(book, length, seed) | {"window": index, "word_start": w.start, "word_end": w.end}
            return StretchedDoc(w.long, f"{book.key}@{length}#w{index}", True, meta)

        doc = kit.fit(at, length, int(cut.cum[i + 1] - cut.cum[i]))
        if doc is None:
            raise DataError(f"{book.path}:{book.line}: book {book.key!r}: no run of sentences from sentence {i + 1} "
                            f"fits {length} tokens with its marks and question")  # fmt: skip
        sample = kit.samples_built.pop(doc.sample_id)
        text = int(sample.metadata["context_tokens"])
        share = min(1.0, 1.03 * text / int(sample.metadata["prompt_tokens"]))  # over: fit steps down
        yield sample
        if tail or doc.metadata["word_end"] >= book.n_words:
            return
        i = next(k for k, (_, e) in enumerate(cut.bounds) if e == doc.metadata["word_end"]) + 1
        index += 1


def spread(items: Sequence, k: int) -> list:
    """`k` items evenly spread over `items` (first and last included); all of them when k is 0 or covers them."""
    if k <= 0 or k >= len(items):
        return list(items)
    if k == 1:
        return [items[len(items) // 2]]
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)]


def _meta(book: Book, length: int, seed: int) -> dict:
    return {"target_tokens": length, "doc": book.key, "cluster": book.book, "corpus": "bookcoref",
            "book_words": book.n_words, "characters": len(book.clusters), "seed": seed}  # fmt: skip
