"""CoNLL readers: every shipped file of both corpora, the scorer's parsing rules, malformed input, the writer;
the shipped archives: pinned, unpacked once, overridable."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from data_builders.coref.conll import CorefDocument, format_conll, parse_conll, read_conll, write_conll
from data_builders.coref.splits import data_root, from_hf_record, litbank, ontogum
from longctx_eval.errors import DataError


def _root() -> Path:
    return data_root()  # the shipped archives: always present


def test_every_litbank_file_parses_to_the_published_counts() -> None:
    files = sorted((_root() / "litbank" / "coref" / "conll").glob("*.conll"))
    assert len(files) == 100
    docs = [d for f in files for d in read_conll(f)]
    assert len(docs) == 100
    assert sum(len(d.tokens) for d in docs) == 210_532
    assert sum(d.n_mentions for d in docs) == 29_103
    assert sum(len(d.clusters) for d in docs) == 7_927
    assert sum(1 for d in docs for c in d.clusters if len(c) == 1) == 5_763
    assert sum(len(d.sentence_ends) for d in docs) == 8_562
    assert all(d.name == f"({Path(d.path).stem}); part 0" for d in docs)


@pytest.mark.parametrize("layout", ["conll2012", "coref/ontogum/conll"])
def test_every_ontogum_file_parses_in_both_layouts(layout: str) -> None:
    root = _root() / "ontogum"
    files = sorted((root / layout).glob("*.conll"))
    assert len(files) == 150
    docs = {f.stem: read_conll(f)[0] for f in files}
    assert sum(len(d.tokens) for d in docs.values()) == 146_324
    assert sum(d.n_mentions for d in docs.values()) == 18_850
    assert sum(len(d.clusters) for d in docs.values()) == 4_403
    with (root / "docs.tsv").open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            d = docs[row["doc"]]
            assert (len(d.tokens), d.n_mentions, len(d.clusters)) == (
                int(row["tokens"]), int(row["mentions"]), int(row["clusters"])
            )  # fmt: skip
            if layout == "conll2012":
                assert len(d.sentence_ends) == int(row["sentences"]) and d.doc_id == row["doc"]


def test_both_ontogum_layouts_give_the_same_entities() -> None:
    root = _root() / "ontogum"
    for f in sorted((root / "conll2012").glob("*.conll"))[:40]:
        a, b = read_conll(f)[0], read_conll(root / "coref" / "ontogum" / "conll" / f.name)[0]
        assert sorted(map(sorted, a.clusters)) == sorted(map(sorted, b.clusters))


def test_ontogum_repeated_key_spans_are_kept_in_both_entities() -> None:
    d = read_conll(_root() / "ontogum" / "conll2012" / "GUM_bio_galois.conll")[0]
    holders = [c for c in d.clusters if (455, 455) in c]
    assert len(holders) == 2


def test_splits() -> None:
    _root()
    assert len(litbank("test", 0).documents) == 10 and litbank("train", 0).documents[0].tokens
    assert sum(len(d.tokens) for d in litbank("test", 0).documents) == 20_638
    assert [len(ontogum(s).documents) for s in ("train", "dev", "test")] == [114, 18, 18]
    assert not ontogum("test").singletons and litbank("test").singletons
    every = litbank("all").documents  # the 10 folds' test lists: each of the 100 documents once
    assert len(every) == 100 == len({d.name for d in every})
    assert {d.name for d in litbank("test", 3).documents} <= {d.name for d in every}
    assert len(ontogum("all").documents) == 114 + 18 + 18


DOC = """#begin document (t); part 000
t\t0\t0\tJohn\t(0
t\t0\t1\tSmith\t0)
t\t0\t2\tsaw\t-
t\t0\t3\thim\t(0)|(1)

t\t0\t0\tHe\t(0(2)
t\t0\t1\tleft\t0)
#end document
"""


def test_bracket_rules_and_token_numbering() -> None:
    (d,) = parse_conll(DOC.splitlines())
    assert d.tokens == ("John", "Smith", "saw", "him", "He", "left")
    assert d.sentence_ends == (4, 6)
    # Entity order is first-seen order; one-token marks are read before opens, opens before closes.
    assert d.clusters == (((0, 1), (3, 3), (4, 5)), ((3, 3),), ((4, 4),))
    assert d.doc_id == "t"


def test_scorer_quirks_trailing_empty_fields_and_double_antecedents() -> None:
    text = "#begin document x\nx\t0\t0\tA\t(3)\t\nx\t0\t1\tB\t(4+5)\t\n#end document\n"
    (d,) = parse_conll(text.splitlines())
    assert d.clusters == (((0, 0),),)  # field 5 is read when 6 is empty; (4+5) is discarded


def test_multi_part_documents_are_separate() -> None:
    two = DOC + DOC.replace("part 000", "part 001")
    docs = parse_conll(two.splitlines())
    assert [d.name for d in docs] == ["(t); part 000", "(t); part 001"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("#begin document x\nx\t0\t0\tA\t(1\n#end document\n", r"<s>:2: unbalanced brackets: '\(1' opened here"),
        ("#begin document x\nx\t0\t0\tA\t1)\n#end document\n", r"<s>:2: unbalanced brackets: '1\)' closes"),
        ("#begin document x\nx\t0\t0\tA\t-\n", r"<s>:2: end of file inside document 'x'.*expected '#end document'"),
        ("#begin document x\nx\t0\t0\tA\t-\nx\t0\t1\tB\t-\t-\n#end document\n", r"<s>:3: token line has 6 fields"),
        ("#begin document x\nx\tA\n#end document\n", r"<s>:2: token line has 2 field"),
        ("#begin document x\nx\t0\t0\tA\t(a)\n#end document\n", r"<s>:2: coreference field '\(a\)'"),
        ("#begin document x\nx\t0\t0\tA\t(1.5)\n#end document\n", r"<s>:2: .*cluster id '1\.5' is not an integer"),
        ("#begin document x\nx\t0\t0\tA\t(1\nx\t0\t1\tB\t1.5)\n#end document\n", r"<s>:3: .*id '1\.5' is not an"),
        ("#begin document x\n#begin document y\n", r"<s>:2: '#begin document' inside document 'x'"),
        ("x\t0\t0\tA\t-\n", r"<s>:1: token line outside a document"),
        ("#begin document x\n#end document\n#begin document x\n#end document\n", r"<s>:3: document name 'x' repeats"),
    ],
)
def test_malformed_input_names_file_line_and_problem(text: str, problem: str) -> None:
    with pytest.raises(DataError, match=problem):
        parse_conll(text.splitlines(), "<s>")


def test_missing_file_and_bad_encoding(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        read_conll(tmp_path / "nope.conll")
    bad = tmp_path / "bad.conll"
    bad.write_bytes(b"#begin document x\n\xff\n")
    with pytest.raises(DataError, match="not UTF-8"):
        read_conll(bad)


def test_writer_round_trips_nested_and_singleton_mentions(tmp_path: Path) -> None:
    (d,) = parse_conll(DOC.splitlines())
    clusters = [[(0, 5), (1, 3), (4, 4)], [(0, 1), (0, 0)], [(2, 2)]]
    path = tmp_path / "out.conll"
    write_conll(path, [d], [clusters])
    (back,) = read_conll(path)
    assert sorted(map(sorted, back.clusters)) == sorted(map(sorted, clusters))
    assert back.tokens == d.tokens and back.name == d.name


def test_writer_refuses_what_brackets_cannot_encode() -> None:
    d = CorefDocument("(x); part 000", ("a", "b", "c", "d"), (4,), ())
    with pytest.raises(DataError, match="cannot be written"):
        format_conll(d, [[(0, 2), (2, 3)]])  # one entity, two mentions sharing token 2


def test_hf_ontonotes_record_conversion() -> None:
    record = {
        "document_id": "bc/cctv/00/cctv_0001",
        "sentences": [
            {"part_id": 0, "words": ["John", "left", "."], "speaker": "A", "coref_spans": [[5, 0, 0]]},
            {"part_id": 0, "words": ["He", "smiled"], "speaker": "A", "coref_spans": [[5, 0, 0]]},
            {"part_id": 1, "words": ["It", "rained"], "speaker": "B", "coref_spans": []},
        ],
    }
    first, second = from_hf_record(record)
    assert first.name == "(bc/cctv/00/cctv_0001); part 000" and second.name.endswith("part 001")
    assert first.clusters == (((0, 0), (3, 3)),) and first.sentence_ends == (3, 5)
    with pytest.raises(DataError, match="outside its sentence"):
        from_hf_record({"document_id": "x", "sentences": [{"words": ["a"], "coref_spans": [[1, 0, 3]]}]})
