"""Chunk boundaries that fall back into step after an insertion (`ChunkConfig(resync=True)`, `chunking=resync`).

The greedy rule (the default) is unchanged byte for byte (its spans are pinned below, computed with the chunker
before resync existed). Under resync, inserting a sentence (a needle, a fact) changes only the chunks of the
segment that holds it: every chunk from the next sync sentence on is the haystack's own chunk, same text.
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from longctx_eval.errors import ConfigError
from longctx_eval.text.chunking import ChunkConfig, _layout, chunk_document, sync_sentences
from longctx_eval.text.offset_index import OffsetIndex

WORDS = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "harbour",
    "lantern",
    "keeper",
    "winter",
    "ship",
    "came",
    "slowly",
    "north",
    "over",
    "quiet",
    "water",
    "bell",
    "rang",
    "twice",
    "while",
    "old",
    "Marten",
    "watched",
    "from",
    "his",
    "window",
    "grey",
    "morning",
    "light",
    "fell",
    "across",
    "stones",
    "nobody",
    "spoke",
    "about",
    "storm",
    "again",
    "until",
    "evening",
    "when",
    "letters",
    "arrived",
    "from",
    "city",
    "council",
    "asking",
    "questions",
]


def prose(seed: int, paragraphs: int) -> str:
    """Self-contained prose (so the pinned spans depend on nothing but the chunker and MiniLM's tokenizer)."""
    rng = random.Random(seed)
    out = []
    for _ in range(paragraphs):
        sentences = []
        for _ in range(rng.randint(1, 8)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(3, 40))]
            sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", ".", "?", "!"]))
        out.append(" ".join(sentences))
    return "\n\n".join(out)


def spans_sha(chunks) -> str:
    return hashlib.sha256(
        json.dumps([(c.char_start, c.char_end, c.token_start, c.token_end) for c in chunks]).encode()
    ).hexdigest()


# Computed with the chunker of commit f0f6750 (before resync existed) on prose(5, 60) in MiniLM's tokenizer.
GREEDY_PINNED = {
    (128, 16): "091ba764e0dd6154c605f357bb49ca32e8531d55b37b28600b4b30ec1d80c2d8",
    (64, 0): "292a842936281d8815dcfd96c2d816dbf867849490fe13654da281fe56da6594",
}


@pytest.mark.parametrize(("budget", "overlap"), sorted(GREEDY_PINNED))
def test_the_greedy_rule_is_unchanged(minilm_tokenizer, budget, overlap):
    chunks = chunk_document(prose(5, 60), minilm_tokenizer, ChunkConfig(budget, overlap))
    assert spans_sha(chunks) == GREEDY_PINNED[(budget, overlap)]


def _insert(text: str, at: int, sentence: str) -> str:
    """`sentence` inserted at the sentence start `at`, as the needle builders insert (a space after it)."""
    return text[:at] + sentence + " " + text[at:]


NEEDLE = "The special magic number for Varkholt is 4817293."


def _changed(base, other) -> list[int]:
    """Indices of the chunks of `other` whose text is no chunk text of `base`."""
    known = {c.text for c in base}
    return [i for i, c in enumerate(other) if c.text not in known]


@pytest.mark.parametrize(("budget", "overlap"), [(128, 16), (64, 8), (32, 0)])
def test_resync_chunks_keep_the_offset_contract(minilm_tokenizer, budget, overlap):
    text = prose(7, 80)
    chunks = chunk_document(text, minilm_tokenizer, ChunkConfig(budget, overlap, resync=True))
    n_tokens = len(minilm_tokenizer.encode(text).ids)
    assert chunks[0].char_start == 0 or not text[: chunks[0].char_start].strip()
    for prev, c in zip(chunks, chunks[1:], strict=False):
        assert text[c.char_start : c.char_end] == c.text
        assert c.char_start <= prev.char_end  # no gap
        assert c.overlap_tokens <= overlap and c.token_end - c.token_start <= budget
    assert not text[chunks[-1].char_end :].strip()
    OffsetIndex(chunks, len(text), n_tokens)  # sorted, inside the text: the index accepts them


def test_an_insertion_changes_only_the_chunks_of_its_segment(minilm_tokenizer):
    text = prose(11, 120)  # about 9K MiniLM tokens
    cfg = ChunkConfig(128, 16, resync=True)
    base = chunk_document(text, minilm_tokenizer, cfg)
    layout = _layout(text, minilm_tokenizer, "english")
    assert layout is not None
    sync_starts = [layout.sent_start[j] for j in sync_sentences(text, layout, cfg.sync_every)]
    assert len(sync_starts) > 5  # several segments: about one per 1,024 tokens
    rng = random.Random(0)
    resync_changed = []
    for at in rng.sample(layout.sent_start[1:], 12):
        other_text = _insert(text, at, NEEDLE)
        other = chunk_document(other_text, minilm_tokenizer, cfg)
        changed = _changed(base, other)
        resync_changed.append(len(changed))
        # Every chunk from the first sync sentence after the insertion on is the haystack's own chunk.
        after = next((s for s in sync_starts if s > at), None)
        if after is not None:
            shift = len(NEEDLE) + 1
            tail = [c for c in other if c.char_start >= after + shift]
            same = [c for c in base if c.char_start >= after]
            assert [c.text for c in tail] == [c.text for c in same]
            assert [c.char_start - shift for c in tail] == [c.char_start for c in same]
        # ... and those before the insertion's segment too: only the segment holding it changes.
        before = max(s for s in sync_starts if s <= at)
        assert all(other[i].char_end > before for i in changed)
    # A handful per insertion, not every following chunk (the document has about 90).
    assert max(resync_changed) <= 16 and sum(resync_changed) / len(resync_changed) <= 8, resync_changed
    assert len(base) > 60


def test_sync_sentences_are_chosen_by_their_own_text(minilm_tokenizer):
    text = prose(3, 60)
    cfg = ChunkConfig(128, 16, resync=True)
    layout = _layout(text, minilm_tokenizer, "english")
    at = layout.sent_start[len(layout.sent_start) // 2]
    other_text = _insert(text, at, NEEDLE)
    other = _layout(other_text, minilm_tokenizer, "english")

    def chosen(t, lay):
        return {t[lay.sent_start[j] : lay.sent_end[j]] for j in sync_sentences(t, lay, cfg.sync_every)[1:]}

    assert chosen(text, layout) - chosen(other_text, other) <= set()
    assert chosen(other_text, other) - chosen(text, layout) <= {NEEDLE}
    # About one sync sentence per sync_every tokens.
    n = layout.n_tokens
    assert 0.3 * n / cfg.sync_every <= len(sync_sentences(text, layout, cfg.sync_every)) <= 3 * n / cfg.sync_every + 2


def test_resync_options_are_checked_and_keep_the_greedy_keys():
    with pytest.raises(ConfigError, match="cannot be combined"):
        ChunkConfig(128, 16, resync=True, semantic=True)
    with pytest.raises(ConfigError, match="sync_tokens"):
        ChunkConfig(128, 16, resync=True, sync_tokens=64)
    with pytest.raises(ConfigError, match="resync"):
        ChunkConfig.from_dict({"resync": "yes"})
    greedy = ChunkConfig(128, 16).key_fields()
    assert set(greedy) == {"max_tokens", "overlap", "semantic", "breakpoint_percentile", "language"}
    assert ChunkConfig(128, 16, resync=True).key_fields()["resync"] is True
    assert ChunkConfig(128, 16, resync=True).sync_every == 1024


def test_the_chunking_option_is_part_of_a_retrievers_identity():
    from longctx_eval.models.kinds import MODEL_KINDS
    from longctx_eval.models.spec import parse_spec
    from longctx_eval.sample import Request

    plain, resync = parse_spec("bm25"), parse_spec("bm25?chunking=resync")
    assert (plain.name, resync.name) == ("bm25", "bm25-resync")
    assert parse_spec("minilm?chunking=resync&rerank=maxsim").name == "minilm-resync-maxsim"
    with pytest.raises(ConfigError, match="chunking"):
        parse_spec("minilm?chunking=sliding")
    a, b = (MODEL_KINDS.get("bm25").load(s) for s in (plain, resync))
    assert "chunking" not in a.meta.settings  # the default's identity is what it was
    assert b.meta.settings["chunking"] == "resync" and a.identity != b.identity
    text = prose(11, 40)
    req = Request("x", "q", text, "lantern keeper")
    resync_chunks = chunk_document(text, b.tokenizer, ChunkConfig(128, 16, resync=True))
    assert b.retrieve([req])[0].data["chunks"] == len(resync_chunks)
    assert a.retrieve([req])[0].data["chunks"] == len(chunk_document(text, a.tokenizer, ChunkConfig(128, 16)))


PINNED_IDENTITIES = {
    "bm25": "335ccc71e76a6bab1187a81c931ccd314c94df863bfd70bc950940958daac959",
    "minilm": "17703195dc200136e62a4f99a96cbbb658217e24ffc87b665f536b9083680343",
    "hybrid": "e4738688e78a644997e53f77e00ab2d7faf743b2d7fd80003e7f36639bd7ee6d",
    "minilm?rerank=maxsim": "342dd7f05b8c9710d973895d842b523c95d43f22a480ae9c7a6228fd64ef632e",
}
"""`identity_sha256` of the default retrievers in the leaderboard's run copies of 2026-11-30, made before the
chunk-vector cache and `chunking=` existed: their run folders, prediction keys and board rows stay theirs."""


@pytest.mark.parametrize("spec", sorted(PINNED_IDENTITIES))
def test_the_default_retrievers_keep_their_identity(spec):
    from longctx_eval.models.kinds import MODEL_KINDS
    from longctx_eval.models.spec import parse_spec

    parsed = parse_spec(spec)
    adapter = MODEL_KINDS.get(parsed.kind).load(parsed)
    assert "chunking" not in adapter.meta.settings
    assert adapter.meta.identity_sha256 == PINNED_IDENTITIES[spec]


def test_the_chunk_command_takes_resync(tmp_path, minilm_tokenizer, capsysbinary):
    import json as json_

    from longctx_eval.cli import main

    text = prose(11, 40)
    path = tmp_path / "doc.txt"
    path.write_text(text, encoding="utf-8")
    assert (
        main(["chunk", str(path), "--tokenizer", "minilm", "--max-tokens", "128", "--overlap", "16", "--resync"]) == 0
    )
    lines = capsysbinary.readouterr().out.decode().splitlines()
    expected = chunk_document(text, minilm_tokenizer, ChunkConfig(128, 16, resync=True))
    assert [json_.loads(line)["char_start"] for line in lines] == [c.char_start for c in expected]
    assert main(["chunk", str(path), "--tokenizer", "minilm", "--resync", "--semantic"]) == 2
