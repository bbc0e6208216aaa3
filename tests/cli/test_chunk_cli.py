"""`longctx-eval chunk`: JSON lines with the library's exact offsets, streamed, atomic --out, one-line errors."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from data_builders import get_source
from longctx_eval.cli import main
from longctx_eval.cli.chunk import FIELDS, write_lines
from longctx_eval.text.chunking import ChunkConfig, chunk_document

KEYS = ["index", "text", "char_start", "char_end", "token_start", "token_end", "overlap_chars", "overlap_tokens"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Real prose with a BOM, CRLF paragraphs, CJK, emoji, combining marks and a long unbroken run."""
    paragraphs = get_source("synthetic").paragraphs(seed=11)
    prose = "\n\n".join(next(paragraphs) for _ in range(30))
    extra = "Caf\u0065\u0301 au lait, \u6771\u4eac\u3067\u4f1a\u3044\u307e\u3057\u3087\u3046\u3002 "
    extra += "\U0001f600\U0001f680!\r\n\r\n"
    path = tmp_path_factory.mktemp("corpus") / "prose.txt"
    path.write_bytes(("\ufeff" + prose[:4000] + "\r\n\r\n" + extra + "x" * 700 + "\n\n" + prose[4000:]).encode())
    return path


def _records(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def _expected(text: str, tokenizer, **config) -> list[dict]:
    return [{k: getattr(c, k) for k in KEYS} for c in chunk_document(text, tokenizer, ChunkConfig(**config))]


def test_stdout_lines_are_the_library_chunks_with_exact_offsets(corpus, minilm_tokenizer, capsysbinary):
    code = main(["chunk", str(corpus), "--tokenizer", "minilm", "--max-tokens", "64", "--overlap", "8"])
    out = capsysbinary.readouterr().out
    assert code == 0
    records = _records(out)
    text = corpus.read_bytes().decode("utf-8")  # offsets index the file's exact text: BOM and CRLF kept
    assert records == _expected(text, minilm_tokenizer, max_tokens=64, overlap=8)
    assert len(records) > 20 and list(records[0]) == KEYS == list(FIELDS)
    for prev, rec in zip(records, records[1:], strict=False):
        assert text[rec["char_start"] : rec["char_end"]] == rec["text"]
        assert rec["char_start"] <= prev["char_end"] and rec["overlap_tokens"] <= 8  # no gap, bounded overlap
    assert records[-1]["token_end"] == minilm_tokenizer.count(text)


def test_out_is_written_atomically_and_equals_stdout(corpus, bpe_tokenizer, tmp_path, capsysbinary):
    tok = tmp_path / "tokenizer.json"
    tok.write_text(bpe_tokenizer.backend.to_str())
    argv = ["chunk", str(corpus), "--tokenizer", str(tok), "--max-tokens", "100", "--overlap", "20"]
    assert main(argv) == 0
    streamed = capsysbinary.readouterr().out
    out = tmp_path / "sub" / "chunks.jsonl"
    assert main([*argv, "--out", str(out)]) == 0
    assert f"chunks of {corpus} to {out}" in capsysbinary.readouterr().err.decode()
    assert out.read_bytes() == streamed
    assert [p.name for p in out.parent.iterdir()] == ["chunks.jsonl"]  # no temp file left
    text = corpus.read_bytes().decode()
    assert _records(streamed) == _expected(text, bpe_tokenizer, max_tokens=100, overlap=20)


def test_each_line_is_written_before_the_next_chunk_is_made(corpus, minilm_tokenizer):
    chunks = iter(chunk_document(corpus.read_text(encoding="utf-8"), minilm_tokenizer, ChunkConfig(64, 8)))

    def first_then_fail():
        yield next(chunks)
        raise RuntimeError("the second chunk is not ready")

    sink = io.BytesIO()
    with pytest.raises(RuntimeError):
        write_lines(first_then_fail(), sink, flush=True)
    assert len(_records(sink.getvalue())) == 1


def test_empty_file_gives_no_lines(tmp_path, capsysbinary):
    (tmp_path / "empty.txt").write_bytes(b"")
    assert main(["chunk", str(tmp_path / "empty.txt"), "--tokenizer", "minilm"]) == 0
    assert capsysbinary.readouterr().out == b""


def test_semantic_mode_uses_the_packaged_minilm(corpus, minilm_tokenizer, capsysbinary, monkeypatch):
    from longctx_eval.models import semantic_embed

    loaded = []  # the model is loaded once, by the CLI, and reused for the reference chunks
    real = semantic_embed.minilm_embedder

    def once():
        loaded.append(real())
        return loaded[-1]

    monkeypatch.setattr(semantic_embed, "minilm_embedder", once)
    text = "\n\n".join(corpus.read_text(encoding="utf-8").split("\n\n")[:8])
    small = corpus.parent / "small.txt"
    small.write_text(text, encoding="utf-8", newline="")
    argv = ["chunk", str(small), "--tokenizer", "minilm", "--max-tokens", "96", "--overlap", "0", "--semantic"]
    assert main([*argv, "--breakpoint-percentile", "80"]) == 0
    records = _records(capsysbinary.readouterr().out)
    config = ChunkConfig(96, 0, semantic=True, breakpoint_percentile=80.0)
    expected = [
        {k: getattr(c, k) for k in KEYS} for c in chunk_document(text, minilm_tokenizer, config, embed=loaded[0])
    ]
    assert len(loaded) == 1 and records == expected
    assert records != _expected(text, minilm_tokenizer, max_tokens=96, overlap=0)  # topic shifts moved cuts


def test_semantic_without_the_embedder_module_is_a_one_line_error(corpus, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "longctx_eval.models.semantic_embed", None)
    code = main(["chunk", str(corpus), "--tokenizer", "minilm", "--semantic"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--semantic needs the sentence embedder" in err and "\n" not in err


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, [], "no such file; expected a UTF-8 text file"),
        ("dir", [], "is a folder; expected a UTF-8 text file"),
        (b"caf\xe9 au lait", [], "is not UTF-8 text: byte 0xe9 at byte offset 3"),
        (
            b"Fine text.",
            ["--overlap", "64", "--max-tokens", "64"],
            "--overlap 64: expected 0 <= overlap < --max-tokens",
        ),
        (b"Fine text.", ["--max-tokens", "0"], "--max-tokens 0: expected a positive number"),
        (b"Fine text.", ["--language", "klingon"], "sentence language 'klingon' has no Punkt model"),
        (b"Fine text.", ["--tokenizer", "nobody/no-such-tokenizer"], "tokenizer 'nobody/no-such-tokenizer' cannot be"),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, capsys, setup, args, message):
    path = tmp_path / "in.txt"
    if setup == "dir":
        path.mkdir()
    elif setup is not None:
        path.write_bytes(setup)
    out = tmp_path / "out.jsonl"
    code = main(["chunk", str(path), "--tokenizer", "minilm", *args, "--out", str(out)])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2 and message in err and "\n" not in err and "Traceback" not in err
    assert captured.out == "" and not out.exists()
