"""Data builders: the task author's API for long contexts, and the dataset builders behind `longctx-eval build`.

What a task author needs (each name has its own docstring):

- Haystack sources: `get_source("austen" | "synthetic" | "files:<glob>" | "hf:<name>")`, `register_source`
  for a new one (or the `longctx_eval.sources` entry point group), the `HaystackSource` protocol.
- Exact-length text: `assemble(source, tokenizer, n_tokens, seed)` is exactly `n_tokens` tokens.
- Exact spans: `insert_sentences(source, tokenizer, n_tokens, [(sentence, depth), ...], seed)` places
  sentences at sentence boundaries and returns each one's char and token `Span` in a context of exactly
  `n_tokens` tokens; `build_needle_doc` does it for one key-value needle with its question.
- The needle grid of the needle task: `needle_cells` (shared with the `needle` dataset builder).

This package imports only `longctx_eval` (the core), never `tasks`.
"""

from data_builders.haystack.assembly import (
    FilesSource,
    HaystackSource,
    SyntheticSource,
    assemble,
    get_source,
    register_source,
    source_names,
)
from data_builders.haystack.sources import AustenSource, HFSource
from data_builders.haystack.span_insertion import (
    MIN_HAYSTACK_TOKENS,
    InsertedContext,
    Span,
    insert_sentences,
    sentence_ends,
)
from data_builders.haystack.synthetic_narrative import narrative_paragraphs
from data_builders.needle.grid import NeedleCell, depth_grid, needle_cells
from data_builders.needle.insertion import (
    MAGIC_NUMBER,
    PASSCODE,
    NeedleDoc,
    NeedleTemplate,
    build_needle_doc,
    needle_question,
)

__all__ = [
    "MAGIC_NUMBER",
    "MIN_HAYSTACK_TOKENS",
    "PASSCODE",
    "AustenSource",
    "FilesSource",
    "HFSource",
    "HaystackSource",
    "InsertedContext",
    "NeedleCell",
    "NeedleDoc",
    "NeedleTemplate",
    "Span",
    "SyntheticSource",
    "assemble",
    "build_needle_doc",
    "depth_grid",
    "get_source",
    "insert_sentences",
    "narrative_paragraphs",
    "needle_cells",
    "needle_question",
    "register_source",
    "sentence_ends",
    "source_names",
]
