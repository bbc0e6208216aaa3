"""The retrieval family: the fact bank, documents with planted facts and queries, its card and builder."""
