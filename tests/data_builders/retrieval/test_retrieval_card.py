"""The retrieval card reproduces the suite's recall@K: code written from the card alone (its chunk spans, its
BM25 paragraph) scores every query of a built dataset exactly as `run --model bm25` did.

The card-side code below uses no suite code: plain parquet rows, the README's text, `re` and numpy.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import datasets
import numpy as np
import pytest

from data_builders.dataset.export import build_dataset
from data_builders.dataset.registry import BuildConfig
from longctx_eval.cli import main

LENGTHS, SEED, TOPICS = (2048, 8192), 3, 3
KS = (1, 5, 10, 20, 50, 100)


@pytest.fixture(scope="module")
def built(minilm_tokenizer, tmp_path_factory):
    """The dataset in MiniLM's tokenizer (bm25's) and the suite's own bm25 run of the same documents."""
    tmp = tmp_path_factory.mktemp("retrieval-card")
    config = BuildConfig(lengths=LENGTHS, seed=SEED, source="synthetic", options={"topics": str(TOPICS)})
    report = build_dataset("retrieval", config, tmp / "ds", minilm_tokenizer)
    out = tmp / "runs"
    lengths = ",".join(map(str, LENGTHS))
    args = ["run", "--model", "bm25", "--tasks", "retrieval", "--lengths", lengths, "--seed", str(SEED)]
    args += ["--task-arg", f"retrieval.topics={TOPICS}", "--task-arg", "retrieval.source=synthetic", "--out", str(out)]
    assert main(args) == 0
    return report.out, out / "bm25", tmp / "cache"


def _card_params(card: str) -> tuple[str, set[str], float, float, int]:
    """Token pattern, stopwords, k1, b and the number of chunks returned, as the card's BM25 paragraph states."""
    para = " ".join(card[card.index("**The `bm25` baseline**") :].split("\n\n")[0].split())
    pattern = re.search(r"regular expression\s+`([^`]+)`", para).group(1)
    stop = set(re.findall(r"`([a-z]+)`", re.search(r"English stopwords \(([^)]*)\)", para).group(1)))
    k1 = float(re.search(r"`k1 = ([0-9.]+)`", para).group(1))
    b = float(re.search(r"`b = ([0-9.]+)`", para).group(1))
    top = int(re.search(r"The top `(\d+)` chunks", para).group(1))
    assert "float32" in para and "equal scores in chunk order" in para and "once per occurrence" in para
    return pattern, stop, k1, b, top


def _card_bm25(chunks: list[str], query: str, pattern: str, stop: set[str], k1: float, b: float) -> np.ndarray:
    """BM25 as the card words it: Lucene idf, tf / (tf + k1 (1 - b + b |c| / avg)), float32 weights and sums."""

    def terms(text: str) -> list[str]:
        return [t for t in re.findall(pattern, text.lower()) if t not in stop]

    docs = [Counter(terms(c)) for c in chunks]
    n = len(docs)
    sizes = [sum(d.values()) for d in docs]
    avg = sum(sizes) / n
    df = Counter(t for d in docs for t in d)
    scores = np.zeros(n, dtype=np.float32)
    for term in terms(query):
        if term not in df:
            continue
        idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
        for i, d in enumerate(docs):
            tf = d.get(term, 0)
            if tf:
                weight = np.float32(idf * tf / (tf + k1 * (1 - b + b * sizes[i] / avg)))
                scores[i] = np.float32(scores[i] + weight)
    return scores


def test_card_only_bm25_reproduces_our_recall_at_k(built):
    folder, run_dir, cache = built
    card = (folder / "README.md").read_text()
    assert "Punkt" in card and "`128`-token chunks with `16` tokens of" in card and "chunk_starts[i]" in card
    pattern, stop, k1, b, top = _card_params(card)
    docs = {
        d["doc_id"]: d["text"]
        for d in datasets.load_dataset(str(folder), "documents", split="test", cache_dir=str(cache))
    }
    rows = [
        row
        for n in LENGTHS
        for row in datasets.load_dataset(str(folder), f"retrieval_{n}", split="test", cache_dir=str(cache))
    ]
    ours = {}
    for line in (run_dir / "scores" / "retrieval.jsonl").read_text().splitlines():
        record = json.loads(line)
        ours[record["id"]] = record["scores"]
    assert len(ours) == len(rows) == 3 * TOPICS * len(LENGTHS)
    card_recall5 = []
    for row in rows:
        context = docs[row["doc_id"]]
        spans = list(zip(row["chunk_starts"], row["chunk_ends"], strict=True))
        scores = _card_bm25([context[s:e] for s, e in spans], row["query"], pattern, stop, k1, b)
        order = sorted(range(len(spans)), key=lambda i: (-float(scores[i]), i))[:top]
        gold = list(zip(row["gold_starts"], row["gold_ends"], strict=True))

        def found_by(rank: int, gold=gold, order=order, spans=spans) -> float:  # noqa: ANN001 - this row's
            hits = [spans[i] for i in order[:rank]]
            return sum(any(s <= gs and ge <= e for s, e in hits) for gs, ge in gold) / len(gold)

        for k in KS:
            assert found_by(k) == pytest.approx(ours[row["id"]][f"recall@{k}"], abs=1e-12), (row["id"], k)
        card_recall5.append(found_by(5))
    assert len(card_recall5) == len(rows)
    run = json.loads((run_dir / "run.json").read_text())["tasks"][0]
    pooled = next(r for r in run["results"] if r["metric"] == "recall@5" and r["length"] is None)
    assert pooled["value"] == pytest.approx(float(np.mean(card_recall5)))
