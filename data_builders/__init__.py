"""Data builders: haystack sources, exact-length assembly and needle insertion."""

from data_builders.haystack import (
    FilesSource,
    HaystackSource,
    SyntheticSource,
    assemble,
    get_source,
    register_source,
)
from data_builders.needle import (
    MAGIC_NUMBER,
    PASSCODE,
    NeedleDoc,
    NeedleTemplate,
    build_needle_doc,
    needle_question,
)
from data_builders.sources import AustenSource, HFSource
from data_builders.synthetic_narrative import narrative_paragraphs

__all__ = [
    "MAGIC_NUMBER",
    "PASSCODE",
    "AustenSource",
    "FilesSource",
    "HFSource",
    "HaystackSource",
    "NeedleDoc",
    "NeedleTemplate",
    "SyntheticSource",
    "assemble",
    "build_needle_doc",
    "get_source",
    "narrative_paragraphs",
    "needle_question",
    "register_source",
]
