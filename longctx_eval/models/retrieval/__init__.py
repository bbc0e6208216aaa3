"""The retriever kinds (`retriever`, `bm25`, `hybrid`): chunk retrieval, reranking, index and embedding caches."""
