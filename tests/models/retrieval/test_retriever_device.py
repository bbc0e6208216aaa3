"""Retrievers, the maxsim reranker and the semantic chunker take device=auto (issue 17): the default, which is the
CPU on a machine without CUDA, so every identity and index-cache key stays what it was here."""

from __future__ import annotations

import numpy as np

from longctx_eval.models.spec import parse_spec


def test_device_auto_is_the_default_and_the_cpu_here(monkeypatch):
    from longctx_eval.models.retrieval import dense

    for raw in ("minilm", "hybrid", "bm25?rerank=maxsim"):
        assert parse_spec(raw).options.device == "auto"
    captured = {}

    class FakeST:
        max_seq_length = 256

        def __init__(self, path, device):
            captured["device"] = device

    monkeypatch.setattr("sentence_transformers.SentenceTransformer", FakeST)
    dense.load_encoder("minilm", "auto")
    import torch

    assert captured["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")


def test_the_index_identity_names_the_resolved_device():
    from longctx_eval.models.retrieval.dense import DenseRetriever

    model = DenseRetriever(parse_spec("minilm"))
    assert model.indexers[0].identity()["device"] == "cpu"  # as the index caches of earlier runs were keyed


def test_maxsim_and_the_semantic_embedder_default_to_auto():
    import inspect

    from longctx_eval.models.retrieval.rerank_maxsim import MaxSimReranker
    from longctx_eval.models.semantic_embed import minilm_embedder

    assert inspect.signature(MaxSimReranker).parameters["device"].default == "auto"
    assert inspect.signature(minilm_embedder).parameters["device"].default == "auto"
    texts = ["The cat sat on the mat.", "A completely different sentence about rivers."]
    auto, cpu = (
        minilm_embedder(window=0, precision="exact")(texts),
        minilm_embedder(window=0, precision="exact", device="cpu")(texts),
    )
    np.testing.assert_array_equal(auto, cpu)
