"""Haystacks: sources (built-in and `sources/`), exact-length assembly, span insertion, the synthetic narrative."""
