"""Haystack sources and exact-length assembly: text that is exactly n tokens long in a given tokenizer."""

from __future__ import annotations

import glob
import hashlib
import random
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from functools import cached_property, lru_cache
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar, runtime_checkable

from data_builders.haystack.synthetic_narrative import narrative_paragraphs, narrative_sha256
from longctx_eval.errors import ConfigError, DataError, did_you_mean
from longctx_eval.registry import Registry
from longctx_eval.text.pieces import TokenOffsets, token_count, token_offsets
from longctx_eval.text.tokenizer import Tokenizer

PARAGRAPH_SEP = "\n\n"
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
# Tokens requested beyond the target, so the exact-length search can step forward as well as back.
_SLACK_TOKENS = 64
_CALIBRATION_CHARS = 8_000
_FIT_STEPS = 24
_MAX_SKIPS = 8

T = TypeVar("T")


@runtime_checkable
class HaystackSource(Protocol):
    """A named, hashable stream of prose paragraphs; the seed selects which stream."""

    @property
    def name(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    def paragraphs(self, seed: int) -> Iterator[str]: ...

    if TYPE_CHECKING:  # for the checker only: a runtime member would make isinstance() reject unhashable sources

        def __hash__(self) -> int: ...  # haystack_text's lru_cache keys on the source


class SyntheticSource:
    """The seeded synthetic narrative (`synthetic_narrative`): unlimited, varied, no repeated filler."""

    name = "synthetic"

    @cached_property
    def sha256(self) -> str:
        return narrative_sha256()

    def paragraphs(self, seed: int) -> Iterator[str]:
        return narrative_paragraphs(seed)


class FilesSource:
    """Local UTF-8 text files: paragraphs split on blank lines, whitespace inside a paragraph collapsed.

    The stream is finite (each paragraph once, so no silent repetition); the seed rotates where it starts.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.name = f"files:{pattern}"
        root = Path(pattern).expanduser()
        found = root.rglob("*.txt") if root.is_dir() else map(Path, glob.glob(str(root), recursive=True))
        self.paths = sorted(p for p in found if p.is_file())
        if not self.paths:
            raise DataError(
                f"haystack source {self.name!r}: the glob matched no files "
                "(expected files:<glob>, e.g. files:corpus/*.txt, or files:<folder> for its .txt files)"
            )
        self._paragraphs: list[str] = []
        digest = hashlib.sha256()
        for path in self.paths:
            data = path.read_bytes()
            digest.update(hashlib.sha256(data).digest())  # per-file digests keep file boundaries in the hash
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError as e:
                raise DataError(f"haystack source {self.name!r}: {path} is not UTF-8 text ({e})") from e
            self._paragraphs.extend(_split_paragraphs(text))
        self.sha256 = digest.hexdigest()

    def paragraphs(self, seed: int) -> Iterator[str]:
        paras = self._paragraphs
        if not paras:
            return iter(())
        start = random.Random(seed).randrange(len(paras))
        return iter(paras[start:] + paras[:start])


def _split_paragraphs(text: str) -> list[str]:
    blocks = _BLANK_LINE.split(text.replace("\r\n", "\n").replace("\r", "\n"))
    return [para for para in (" ".join(b.split()) for b in blocks) if para]


_SYNTHETIC = SyntheticSource()

SourceFactory = Callable[[str], HaystackSource]
"""Makes a source from the text after the first ':' of its spec ("" when there is none)."""

SOURCES: Registry[SourceFactory] = Registry(
    "haystack source", modules=("data_builders.haystack.sources",), entry_point_group="longctx_eval.sources"
)
"""Source factories by name; plugins register with `register_source` or the `longctx_eval.sources` entry points."""


def register_source(name: str, factory: SourceFactory | str) -> None:
    """Make `get_source("name")` or `get_source("name:arg")` call `factory(arg)` ("" when no arg).

    `factory` may be a lazy "module:function" string, imported on first use. Registering a name that
    another module already registered is an error (the same module may register it again).
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ConfigError(f"haystack source name {name!r}: expected a non-empty name without ':'")
    where = factory if isinstance(factory, str) else getattr(factory, "__module__", "") or repr(factory)
    SOURCES.register(name, factory, source=where)


def _synthetic(arg: str) -> HaystackSource:
    if arg:
        raise ConfigError(f"haystack source 'synthetic' takes no argument, got {arg!r}")
    return _SYNTHETIC


def _files(arg: str) -> HaystackSource:
    if not arg:
        raise ConfigError("haystack source 'files' needs a glob: expected files:<glob>, e.g. files:corpus/*.txt")
    return FilesSource(arg)


register_source("synthetic", _synthetic)
register_source("files", _files)


def source_names() -> list[str]:
    """Every registered haystack source name (built-in, `data_builders.haystack.sources`, entry points), sorted."""
    return SOURCES.names()


def get_source(spec: str = "synthetic") -> HaystackSource:
    """Resolve a source spec: "synthetic", "files:<glob>", "austen" (also "default"), "hf:<name>", ..."""
    if not isinstance(spec, str):
        raise ConfigError(f"haystack source: expected a string such as 'synthetic' or 'files:<glob>', got {spec!r}")
    name, _, arg = spec.partition(":")
    if name not in SOURCES:
        raise ConfigError(f"unknown haystack source {spec!r}." + did_you_mean(name, SOURCES.names()))
    return SOURCES.get(name)(arg)


class Haystack(NamedTuple):
    """Source paragraphs joined by blank lines, with the char end of every token and where each paragraph starts."""

    text: str
    token_ends: list[int]
    paragraph_starts: list[int]  # char offset of each paragraph in `text`
    paragraph_ids: list[int]  # its index in the source stream (skipped paragraphs leave gaps)

    def paragraph_at(self, char: int) -> int:
        """Stream index of the paragraph holding character `char`."""
        return self.paragraph_ids[max(0, bisect_right(self.paragraph_starts, char) - 1)]


class NoExactCut(DataError):
    """No cut near the guess gives the exact length (e.g. a run of characters that are several tokens each)."""

    def __init__(self, message: str, near_token: int) -> None:
        super().__init__(message)
        self.near_token = near_token


@lru_cache(maxsize=4)  # the samples of one haystack ask for it in turn (grids build a haystack at a time: sharing.py)
def haystack_text(
    source: HaystackSource,
    tokenizer: Tokenizer,
    min_tokens: int,
    seed: int,
    *,
    slack: int = _SLACK_TOKENS,
    skip: frozenset[int] = frozenset(),
) -> Haystack:
    """At least `min_tokens` (aiming for `slack` more) of `source`, leaving out the paragraphs in `skip`.

    The text is encoded once (through the paragraph memo, `text/pieces.py`, where that is exact): a calibration
    sample sets the characters-per-token ratio, so the char budget is only rarely too small (then the stream is
    extended and the whole text encoded again).
    """
    stream = iter(source.paragraphs(seed))
    parts: list[str] = []
    ids: list[int] = []
    chars = 0
    index = -1

    def take(budget: int) -> bool:  # False once the source is exhausted
        nonlocal chars, index
        while chars < budget:
            para = next(stream, None)
            if para is None:
                return False
            index += 1
            if para and index not in skip:
                parts.append(para)
                ids.append(index)
                chars += len(para) + len(PARAGRAPH_SEP)
        return True

    more = take(_CALIBRATION_CHARS)
    if not parts:
        raise DataError(f"haystack source {source.name!r} yielded no text (are its files empty?)")
    sample = PARAGRAPH_SEP.join(parts)
    ratio = len(sample) / max(1, tokenizer.count(sample))
    want = min_tokens + slack
    budget = int(want * ratio * 1.05) + 512
    prev = -1
    while True:
        more = take(budget) and more
        text = PARAGRAPH_SEP.join(parts)
        _, token_ends = token_offsets(tokenizer, text)
        n = len(token_ends)
        if n >= want or (n >= min_tokens and not more):
            starts = list(accumulate((len(p) + len(PARAGRAPH_SEP) for p in parts[:-1]), initial=0))
            return Haystack(text, token_ends.tolist(), starts, ids)
        if not more:
            raise DataError(
                f"haystack source {source.name!r} has only {n} tokens in tokenizer {tokenizer.name!r}; "
                f"{min_tokens} are needed (add text to the source or ask for a shorter length)"
            )
        if n <= prev:
            raise DataError(
                f"tokenizer {tokenizer.name!r} returned {n} tokens for {len(text)} characters, no more than "
                f"for a shorter text: it truncates; disable truncation and padding to measure lengths"
            )
        prev = n
        budget = int(chars * want / max(n, 1) * 1.1) + 512


_FILLERS = ("\n", ".", " .", "\n\n", "..", ".\n", " ..", "\n.\n")
"""Tried in order when no cut of the text itself gives the exact length."""


def fit_length(
    build: Callable[[int], str],
    k0: int,
    lo: int,
    hi: int,
    target: int,
    tokenizer: Tokenizer,
    offsets: bool = False,
) -> tuple[str, TokenOffsets | None]:
    """Find k in [lo, hi] such that `build(k)` is exactly `target` tokens, starting from the guess k0.

    Returns the text and, if `offsets`, its token offsets. Tokenization is not additive at the cut, so each
    guess is measured on the whole text (through the paragraph memo, `text/pieces.py`: only the paragraphs
    not seen before are tokenized, and the result is the whole text's; a tokenizer the memo cannot split
    exactly encodes the whole text) and corrected by the difference (usually exact at once), with
    bisection as a fallback. When the count jumps over the target (a character that is several tokens
    sits at the cut) no k works: raises NoExactCut.
    """
    seen: dict[int, int] = {}
    below, above = lo - 1, hi + 1  # largest k known too short, smallest k known too long
    k = min(max(k0, lo), hi)
    for _ in range(_FIT_STEPS):
        if k not in seen:
            text = build(k)
            enc = token_offsets(tokenizer, text) if offsets else None
            seen[k] = len(enc.starts) if enc is not None else token_count(tokenizer, text)
            if seen[k] == target:
                return text, enc
        if seen[k] < target:
            below = max(below, k)
        else:
            above = min(above, k)
        if above - below <= 1:
            break
        step = k + target - seen[k]
        k = step if below < step < above and step not in seen else (below + above + 1) // 2
        k = min(max(k, lo), hi)
    if below in seen and target - seen[below] <= 2:
        # Adjacent cuts straddle the target (a character of several tokens sits at the cut): end the
        # text just before it with one or two single-token fillers instead, deterministically.
        base = build(below)
        for filler in _FILLERS:
            text = base + filler
            enc = token_offsets(tokenizer, text)
            if len(enc.starts) == target:
                return text, enc if offsets else None
    got = sorted(set(seen.values()), key=lambda c: abs(c - target))[:3]
    raise NoExactCut(
        f"could not cut the haystack to exactly {target} tokens in tokenizer {tokenizer.name!r} "
        f"(nearest counts: {got}): a character of several tokens sits at the cut, or the tokenizer "
        "pads, truncates or adds special tokens",
        near_token=k0,
    )


def with_retries(
    attempt: Callable[[Haystack], T],
    source: HaystackSource,
    tokenizer: Tokenizer,
    min_tokens: int,
    seed: int,
) -> T:
    """Run `attempt` on a haystack; where no exact cut exists, drop the paragraph at the cut and retry.

    Only text whose characters are several tokens each (emoji, scripts missing from a small vocabulary)
    needs this; the retries are deterministic, so the result still depends only on the inputs.
    """
    skip: set[int] = set()
    for tries_left in range(_MAX_SKIPS, -1, -1):
        hay = haystack_text(source, tokenizer, min_tokens, seed, skip=frozenset(skip))
        try:
            return attempt(hay)
        except NoExactCut as e:
            if not tries_left:
                raise
            skip.add(hay.paragraph_at(hay.token_ends[min(e.near_token, len(hay.token_ends)) - 1]))
    raise AssertionError("unreachable")


def assemble(source: HaystackSource, tokenizer: Tokenizer, n_tokens: int, seed: int) -> str:
    """Haystack text from `source` that is exactly `n_tokens` tokens in `tokenizer`; deterministic."""
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 1:
        raise ConfigError(f"n_tokens: expected a positive integer, got {n_tokens!r}")

    def attempt(hay: Haystack) -> str:
        text, ends = hay.text, hay.token_ends
        return fit_length(lambda k: text[: ends[k - 1]], n_tokens, 1, len(ends), n_tokens, tokenizer)[0]

    return with_retries(attempt, source, tokenizer, n_tokens, seed)
