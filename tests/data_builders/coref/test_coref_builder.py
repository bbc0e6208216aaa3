"""The coref dataset builders: parquet that plain `datasets` loads, gold as word, char and token spans that agree."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from data_builders.coref.builder import COREF_FEATURES
from data_builders.coref.documents import corpus_documents
from data_builders.coref.haystack import as_long, measure
from data_builders.coref.splits import ontogum
from data_builders.dataset.export import BuildReport, build_dataset
from data_builders.dataset.registry import BuildConfig, builders
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError, DataError
from longctx_eval.text.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tok_file(bpe_tokenizer, tmp_path_factory) -> Tokenizer:  # noqa: ANN001
    """The session BPE saved as tokenizer.json and loaded by path, as the CLI loads it."""
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    path.write_text(bpe_tokenizer.backend.to_str())
    return Tokenizer.from_file(path, name=str(path))


def _load(report: BuildReport, config: str, cache: Path) -> datasets.Dataset:
    (entry,) = [e for e in report.configs if e.name == config]
    files = [str(report.out / p) for p in entry.paths]
    return datasets.load_dataset("parquet", data_files={"test": files}, split="test", cache_dir=str(cache))


def _check_rows(ds: datasets.Dataset, tokenizer: Tokenizer) -> int:
    mentions = 0
    for row in ds:
        text, words = row["text"], row["words"]
        assert len(words) == len(row["word_starts"])
        for w, start in zip(words, row["word_starts"], strict=True):
            assert text[start : start + len(w)] == w
        offsets = tokenizer.encode(text).offsets
        assert row["n_tokens"] == len(offsets) <= row["target_tokens"]
        for cw, cc, ct in zip(row["clusters"], row["clusters_char"], row["clusters_token"], strict=True):
            assert len(cw) == len(cc) == len(ct)
            for (w0, w1), (c0, c1), (t0, t1) in zip(cw, cc, ct, strict=True):
                mention = text[c0:c1]
                # The character span slices exactly the mention's words as rendered.
                assert c0 == row["word_starts"][w0] and c1 == row["word_starts"][w1] + len(words[w1])
                assert mention.startswith(words[w0]) and mention.endswith(words[w1])
                # The token span covers the mention's characters and no token outside it starts inside it.
                assert offsets[t0][0] <= c0 < offsets[t0][1] and offsets[t1 - 1][0] < c1 <= offsets[t1 - 1][1]
                mentions += 1
    return mentions


def test_the_coref_builders_are_registered() -> None:
    known = builders()
    for name in ("coref_litbank", "coref_ontogum", "coref_synthetic"):
        assert known[name].features == COREF_FEATURES and "clusters_char" in known[name].card.usage


def test_ontogum_dataset_loads_with_plain_datasets_and_offsets_slice_the_text(tok_file, tmp_path) -> None:  # noqa: ANN001
    cfg = BuildConfig(lengths=(4096,), seed=1, source="synthetic", options={"split": "dev"})
    report = build_dataset("coref_ontogum", cfg, tmp_path / "ds", tok_file)
    assert [e.name for e in report.configs] == ["coref_ontogum_4096"]
    ds = _load(report, "coref_ontogum_4096", tmp_path / "cache")
    fitting = [d for d in ontogum("dev").documents if measure(as_long(d), tok_file) <= 4096]
    assert ds.num_rows == len(fitting) >= 10
    assert _check_rows(ds, tok_file) > 1000
    row = ds[0]
    assert row["corpus"] == "ontogum" and row["split"] == "dev" and row["singletons"] is False
    assert row["haystack_words"] > 0 and row["native_words"] + row["haystack_words"] == len(row["words"])
    # The same documents and gold as the coref_ontogum task run with the same seed and source.
    first = next(corpus_documents(ontogum("dev"), [4096], 1, "synthetic", tok_file))
    assert row["id"] == first.sample_id and row["words"] == list(first.long.doc.tokens)
    assert row["clusters"] == [[[s, e] for s, e in c] for c in first.long.doc.clusters]
    card = (report.out / "README.md").read_text()
    assert "clusters_char" in card and "CoNLL F1" in card and "CC BY-SA 3.0" in card


def test_task_and_builder_share_texts(tok_file, tmp_path) -> None:  # noqa: ANN001
    report = build_dataset(
        "coref_synthetic", BuildConfig(lengths=(300, 600), per_cell=2, seed=4, source="synthetic"), tmp_path, tok_file
    )
    rows = {r["id"]: r for c in ("coref_synthetic_300", "coref_synthetic_600") for r in _load(report, c, tmp_path)}
    assert len(rows) == 4
    _check_rows(datasets.Dataset.from_list(list(rows.values()), features=COREF_FEATURES), tok_file)
    # The task writes the same narrative shorter, so that its whole marked prompt fits the length: its text is
    # a prefix of the row's (whole paragraphs) and its gold the row's mentions inside that prefix.
    task = discover().get("coref_synthetic").build(lengths=[300, 600], seed=4, tokenizer=tok_file)
    for sample in task.samples():
        row = rows[sample.id]
        assert row["text"].startswith(sample.context)
        words = sample.metadata["native_words"] + sample.metadata["haystack_words"]
        inside = [[m for m in c if m[1] < words] for c in row["clusters"]]
        assert sample.gold["clusters"] == [c for c in inside if c]
        meta = sample.metadata
        assert meta["context_tokens"] <= row["n_tokens"] and meta["prompt_tokens"] <= meta["target_tokens"]


def test_litbank_options_and_lengths_are_checked(tok_file, tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(DataError, match="no document fits in 512 tokens"):
        build_dataset("coref_litbank", BuildConfig(lengths=(512,), source="synthetic"), tmp_path / "a", tok_file)
    with pytest.raises(ConfigError, match="fold"):
        bad = BuildConfig(lengths=(8192,), source="synthetic", options={"fold": "x"})
        build_dataset("coref_litbank", bad, tmp_path / "b", tok_file)
