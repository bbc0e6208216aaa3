"""Haystack sources: the embedded `austen` corpus, `hf:` datasets, MiniLM semantic chunking, a 1M-token run."""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import zlib

import numpy as np
import pytest

from data_builders import AustenSource, HaystackSource, assemble, build_needle_doc, get_source
from data_builders.haystack.sources import austen as austen_mod
from data_builders.haystack.sources.austen_corpus import CORPUS_SHA256, PINS, paragraphs_from_lines, strip_gutenberg
from data_builders.haystack.sources.debfile import _decompress, ar_members
from data_builders.haystack.sources.fetch_prose import main as fetch_main
from data_builders.haystack.sources.hf import parse_hf_spec
from data_builders.needle.insertion import KEY_QUALIFIERS
from longctx_eval.errors import ConfigError, DataError, PrerequisiteError
from longctx_eval.models.assets import load_tokenizer
from longctx_eval.models.semantic_embed import minilm_embedder, smooth
from longctx_eval.text import ChunkConfig, OffsetIndex, chunk_document

# The 1M-GPT-2-token cut of the same recipe, built independently in the research notes
# (shared/research/offline-assets.md, A.5): its first 11,091 paragraphs plus a newline.
RESEARCH_1M_SHA256 = "1a0014e69a484400af36b93544da8ccdda08e2e79215ae3d8ca6d22d12b46e44"


@pytest.fixture(scope="module")
def austen() -> AustenSource:
    source = get_source("austen")  # built by `make venv` (python -m data_builders.haystack.sources.fetch_prose)
    assert isinstance(source, AustenSource)
    return source


@pytest.fixture(scope="module")
def corpus(austen) -> str:
    return austen_mod.corpus_path().read_text(encoding="utf-8")


# --- the austen corpus ------------------------------------------------------------------------------


def test_corpus_is_the_pinned_text(austen, corpus):
    assert hashlib.sha256(corpus.encode()).hexdigest() == CORPUS_SHA256 == austen.sha256
    paragraphs = corpus.rstrip("\n").split("\n\n")
    assert len(paragraphs) == 12_964 and len(corpus.split()) == 929_640
    cut = "\n\n".join(paragraphs[:11_091]) + "\n"
    assert hashlib.sha256(cut.encode()).hexdigest() == RESEARCH_1M_SHA256  # matches the research build
    assert paragraphs[0] == "PRIDE AND PREJUDICE" and paragraphs[-1].endswith("only found another orphan.")
    # The PG licence and header are gone; the transcriber's note on the sources (kept by the research
    # recipe) is the only mention of Project Gutenberg left.
    assert "Gutenberg-tm" not in corpus and "*** START" not in corpus and "Produced by" not in corpus
    assert corpus.count("Gutenberg") == 1 and "\r" not in corpus
    assert all(p and p == p.strip() and "\n" not in p for p in paragraphs)


def test_needles_cannot_collide_with_the_corpus(corpus):
    assert not re.search(r"\d{5,}", corpus)  # a 7-digit needle value never occurs in the haystack
    assert not set(KEY_QUALIFIERS) & set(re.findall(r"[A-Za-z]+", corpus))


def test_austen_stream_is_seeded_and_complete(austen):
    assert isinstance(austen, HaystackSource) and austen.name == "austen"
    first = list(austen.paragraphs(0))
    assert first == list(austen.paragraphs(0)) and first != list(austen.paragraphs(1))
    assert sorted(first) == sorted(austen.paragraphs(1)) and len(first) == 12_964  # each paragraph once
    assert get_source("austen") is austen  # read once per process


def test_austen_assembles_exactly(austen, minilm_tokenizer, bpe_tokenizer):
    for tok, n in ((minilm_tokenizer, 4096), (bpe_tokenizer, 1500)):
        text = assemble(austen, tok, n, 7)
        assert tok.count(text) == n and text == assemble(austen, tok, n, 7)


def test_recipe_helpers():
    lines = ["  Chapter 1", "", "It is a truth", "universally  acknowledged.", "", "", "End.  "]
    assert paragraphs_from_lines(lines) == ["Chapter 1", "It is a truth universally  acknowledged.", "End."]
    text = "\ufeffHeader\r\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\nProduced by A\r\nBody.\r\n"
    text += "End of Project Gutenberg's X\r\nLicense"
    assert strip_gutenberg(text, "x") == "Body.\n"
    with pytest.raises(DataError, match="START/END markers"):
        strip_gutenberg("no markers", "x")


# --- fetching: .deb and R lazy-load parsing, the cache, clear errors ------------------------------------


@pytest.fixture(scope="module")
def debs_dir(austen):
    return austen_mod.prose_dir() / "debs"


def test_fetch_from_deb_files_rebuilds_identically(tmp_path, monkeypatch, debs_dir, capsys):
    monkeypatch.setenv("LONGCTX_EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(austen_mod.DEBS_ENV, str(debs_dir))
    monkeypatch.setattr(austen_mod.shutil, "which", lambda name: None)  # proves apt-get is never called
    path, cached = austen_mod.ensure_corpus()
    assert not cached and hashlib.sha256(path.read_bytes()).hexdigest() == CORPUS_SHA256
    manifest = json.loads(path.with_suffix(".json").read_text())
    assert manifest["sha256"] == CORPUS_SHA256 and set(manifest["debs"].values()) == {p.sha256 for p in PINS}
    assert fetch_main([]) == 0 and "already cached" in capsys.readouterr().out
    assert austen_mod.ensure_corpus() == (path, True)


def test_fetch_errors_are_clear(tmp_path, monkeypatch, debs_dir, capsys):
    monkeypatch.setenv("LONGCTX_EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(austen_mod.DEBS_ENV, raising=False)
    monkeypatch.setattr(austen_mod.shutil, "which", lambda name: None)
    with pytest.raises(PrerequisiteError, match=r"apt-get is not available.*LONGCTX_EVAL_PROSE_DEBS.*files:<glob>"):
        austen_mod.ensure_corpus()
    with pytest.raises(
        PrerequisiteError, match=r"not built yet: run `python -m data_builders.haystack.sources.fetch_prose`"
    ):
        austen_mod.AustenSource()
    assert fetch_main(["--offline"]) == 1 and "fetch_prose: error: " in capsys.readouterr().err
    monkeypatch.setenv(austen_mod.DEBS_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(PrerequisiteError, match="is not a folder"):
        austen_mod.ensure_corpus()
    (tmp_path / "half").mkdir()
    shutil.copy(debs_dir / PINS[0].filename, tmp_path / "half")
    monkeypatch.setenv(austen_mod.DEBS_ENV, str(tmp_path / "half"))
    with pytest.raises(PrerequisiteError, match=r"holds no r-cran-tokenizers_0\.3\.0-1_amd64\.deb"):
        austen_mod.ensure_corpus()
    tampered = bytearray((debs_dir / PINS[1].filename).read_bytes())
    tampered[-1] ^= 1
    (tmp_path / "half" / PINS[1].filename).write_bytes(bytes(tampered))
    with pytest.raises(DataError, match=rf"sha256 [0-9a-f]{{64}}, expected {PINS[1].sha256}"):
        austen_mod.ensure_corpus()


def test_ar_and_lazyload_parsing(tmp_path):
    member = b"2.0\n"
    header = b"debian-binary/".ljust(16) + b"0".ljust(12) + b"0".ljust(6) * 2 + b"100644".ljust(8)
    archive = b"!<arch>\n" + header + str(len(member)).encode().ljust(10) + b"`\n" + member
    (tmp_path / "x.deb").write_bytes(archive)
    assert ar_members(tmp_path / "x.deb") == {"debian-binary": member}
    (tmp_path / "y.deb").write_bytes(b"PK\x03\x04 not an ar archive")
    with pytest.raises(DataError, match="not a Debian package"):
        ar_members(tmp_path / "y.deb")
    raw = b"X\n" + bytes(range(50))
    length = len(raw).to_bytes(4, "big")
    assert _decompress(length + zlib.compress(raw), True, "t") == raw
    assert _decompress(length + b"1" + zlib.compress(raw), 3, "t") == raw
    assert _decompress(length + b"0" + raw, 3, "t") == raw
    with pytest.raises(DataError, match="unknown R compression type"):
        _decompress(length + b"?" + raw, 3, "t")
    with pytest.raises(DataError, match="the header says"):
        _decompress((len(raw) + 1).to_bytes(4, "big") + zlib.compress(raw), 1, "t")


# --- bad input ----------------------------------------------------------------------------------------


def test_source_spec_errors():
    with pytest.raises(ConfigError, match=r"unknown haystack source 'austin'.*Did you mean 'austen'"):
        get_source("austin")
    with pytest.raises(ConfigError, match="'austen' takes no argument"):
        get_source("austen:emma")
    with pytest.raises(ConfigError, match="needs a dataset name"):
        get_source("hf:")
    with pytest.raises(ConfigError, match=r"unknown option 'colum'.*Did you mean 'column'"):
        get_source("hf:deepmind/pg19?colum=text")
    with pytest.raises(ConfigError, match="shuffle='x'"):
        parse_hf_spec("pg19?shuffle=x")


def test_empty_source_is_reported(tmp_path, minilm_tokenizer):
    (tmp_path / "empty.txt").write_text("\n \n")
    with pytest.raises(DataError, match="yielded no text"):
        build_needle_doc(get_source(f"files:{tmp_path}"), minilm_tokenizer, 500, 0.5, random.Random(0))


def test_length_smaller_than_the_question(austen, minilm_tokenizer, tmp_path, capsys):
    with pytest.raises(DataError, match=r"target_tokens=30 is too small for a needle.*minimum is about"):
        build_needle_doc(austen, minilm_tokenizer, 30, 0.5, random.Random(0))
    from longctx_eval.cli import main

    assert main(["run", "--model", "oracle", "--tasks", "needle", "--lengths", "16", "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err  # needle v5: the length is the prompt budget, checked before any needle
    assert "length 16: the context would be -176 tokens after the 192-token prompt reserve" in err
    assert "Traceback" not in err


def test_tokenizer_that_cannot_load_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PrerequisiteError, match=r"tokenizer 'no-such-org/no-such-tokenizer' cannot be loaded"):
        load_tokenizer("no-such-org/no-such-tokenizer")


# --- hf: sources ----------------------------------------------------------------------------------------


def test_hf_source_offline_names_the_dataset(monkeypatch):
    # The online path (streaming PG-19 from the Hub) cannot run here: this machine has no Hub access.
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PrerequisiteError, match=r"dataset 'deepmind/pg19' \(config 'default'\) cannot be loaded"):
        get_source("hf:deepmind/pg19:default")


def test_hf_source_streams_a_local_dataset(tmp_path, bpe_tokenizer, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    rows = [{"body": f"Book {i} begins.\n\n" + f"Sentence {i} goes on here. " * 40, "n": i} for i in range(12)]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    source = get_source(f"hf:{tmp_path}?column=body&shuffle=4")
    assert source.name == f"hf:{tmp_path}?column=body&shuffle=4" and len(source.sha256) == 64
    first = list(source.paragraphs(0))
    assert first == list(source.paragraphs(0)) and sorted(first) == sorted(source.paragraphs(1))
    assert len(first) == 24 and first[0].startswith("Book ")
    assert bpe_tokenizer.count(assemble(source, bpe_tokenizer, 700, 3)) == 700
    with pytest.raises(ConfigError, match=r"no column 'text'; expected one of \['body', 'n'\]"):
        get_source(f"hf:{tmp_path}")


# --- semantic chunking with the packaged MiniLM ----------------------------------------------------------


@pytest.fixture(scope="module")
def embed():
    return minilm_embedder(batch_size=32, window=0)


def test_minilm_embedder_dedupes_and_smooths(embed):
    vectors = embed(["Emma sat by the fire.", "The whale breached.", "Emma sat by the fire."])
    assert vectors.shape == (3, 384) and np.allclose(vectors[0], vectors[2])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embed([]).shape[0] == 0
    windowed = smooth(vectors, 1)
    assert np.allclose(windowed[0], vectors[0] + vectors[1]) and np.allclose(windowed[1], vectors.sum(0))
    for bad in ({"batch_size": 0}, {"window": -1}, {"dtype": "int8"}):
        with pytest.raises(ConfigError, match="minilm_embedder"):
            minilm_embedder(**bad)


def test_embedder_caches_sentences_across_calls():
    class Counting:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def encode(self, texts: list[str], **_: object) -> np.ndarray:
            self.seen += texts
            return np.array([[len(t), 1.0] for t in texts])

    model = Counting()
    embed = minilm_embedder(window=0, model=model, cache_sentences=3)
    assert embed(["a", "bb", "a"]).tolist() == [[1, 1], [2, 1], [1, 1]] and model.seen == ["a", "bb"]
    assert embed(["bb", "ccc"]).shape == (2, 2) and model.seen == ["a", "bb", "ccc"]
    embed(["dddd", "a"])  # over the bound: the cache starts afresh with these
    assert embed(["dddd", "bb"]).tolist() == [[4, 1], [2, 1]] and model.seen[-1] == "bb"


def test_semantic_chunking_with_minilm(austen, minilm_tokenizer, embed):
    text = assemble(austen, minilm_tokenizer, 3000, 11)
    config = ChunkConfig(max_tokens=256, overlap=32, semantic=True)
    chunks = chunk_document(text, minilm_tokenizer, config, embed=embed)
    plain = chunk_document(text, minilm_tokenizer, ChunkConfig(max_tokens=256, overlap=32))
    assert len(chunks) >= len(plain)  # topic breaks can only end chunks earlier
    assert chunks[0].token_start == 0 and chunks[-1].token_end == 3000
    for prev, c in zip(chunks, chunks[1:], strict=False):
        assert text[c.char_start : c.char_end] == c.text and c.token_end - c.token_start <= 256
        assert c.char_start <= prev.char_end and c.overlap_tokens <= 32


# --- scale: 1M tokens of real prose with a needle, chunked with the full index ---------------------------


def test_one_million_token_document_chunks_and_maps_the_needle_back(austen, minilm_tokenizer):
    doc = build_needle_doc(austen, minilm_tokenizer, 1_000_000, 0.37, random.Random(0))
    chunks = chunk_document(doc.context, minilm_tokenizer, ChunkConfig(max_tokens=512, overlap=64))
    index = OffsetIndex(chunks, len(doc.context), doc.target_tokens)
    text = doc.context
    assert chunks[0].token_start == 0 and chunks[-1].token_end == 1_000_000  # exactly 1M tokens
    assert chunks[0].char_start == 0 and chunks[-1].char_end == len(text)
    for prev, c in zip(chunks, chunks[1:], strict=False):
        assert text[c.char_start : c.char_end] == c.text
        assert c.token_end - c.token_start <= 512 and c.overlap_tokens <= 64
        assert prev.char_start < c.char_start <= prev.char_end and c.token_start <= prev.token_end
    assert text[doc.needle_start : doc.needle_end] == doc.needle
    holding = index.covering(doc.needle_start, doc.needle_end)
    assert holding, "the needle must lie whole inside some chunk"
    for i in holding:
        local = index.to_local_char(i, doc.needle_start)
        assert chunks[i].text[local : local + len(doc.needle)] == doc.needle
        assert index.to_global_char(i, local) == doc.needle_start
    assert index.covering_tokens(doc.needle_token_start, doc.needle_token_end) == holding
    assert abs(doc.actual_depth - 0.37) < 0.001
