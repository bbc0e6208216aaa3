"""Haystacks: sources (built-in and `sources/`), exact-length assembly, span insertion, the synthetic narrative."""

from longctx_eval.old_paths import forward

# the names of the old data_builders.haystack module (now haystack/assembly.py), one release
__getattr__ = forward(__name__, "data_builders.haystack.assembly")
