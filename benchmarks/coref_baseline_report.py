"""coref:baseline on the native (unstretched) test documents: CoNLL F1, LEA, Span-EM, distance and window table.

    python -m benchmarks.coref_baseline_report [--window 1024 --stride 512] [--json]

Distances and windows are in words (CoNLL tokens) here; the coref tasks measure them in the evaluated
model's tokens on haystack-stretched documents. Corpora: OntoGUM test (no singletons) and LitBank fold-0 test.
"""

from __future__ import annotations

import argparse
import json

from data_builders.coref.splits import Corpus, litbank, ontogum
from longctx_eval.metrics.coref import document_counts, scores_from_counts, sum_counts
from longctx_eval.metrics.span_em import GROUPS, fixed_windows, gold_links, link_counts, ratios
from longctx_eval.models.coref_baseline import resolve


def evaluate(corpus: Corpus, window: int, stride: int) -> dict:
    """Scores and Span-EM/link-recall groups of coref:baseline over one corpus split."""
    counts, links = [], {}
    for doc in corpus.documents:
        n = len(doc.tokens)
        system = resolve(doc.tokens, [m for c in doc.clusters for m in c], corpus.singletons)
        system = [[tuple(m) for m in c] for c in system]
        counts.append(document_counts([list(c) for c in doc.clusters], system))
        gl = gold_links(doc.clusters, list(range(n)), list(range(1, n + 1)), fixed_windows(n, window, stride))
        for k, v in link_counts(doc.clusters, gl, system).items():
            links[k] = links.get(k, 0.0) + v
    scores = scores_from_counts(sum_counts(counts))
    r = ratios(links)
    table = {g: {"links": int(links.get(f"span_em@{g}_d", 0)), "span_em": r.get(f"span_em@{g}"),
                 "link_recall": r.get(f"link_recall@{g}")} for g in GROUPS}  # fmt: skip
    return {
        "corpus": corpus.name,
        "split": corpus.split,
        "documents": len(corpus.documents),
        "conll_f1": scores["conll"][2],
        "lea": scores["lea"],
        "muc_f1": scores["muc"][2],
        "bcub_f1": scores["bcub"][2],
        "ceafe_f1": scores["ceafe"][2],
        "blanc_f1": scores["blanc"][2],
        "mentions_f1": scores["mentions"][2],
        "span_em": r["span_em"],
        "link_recall": r["link_recall"],
        "groups": table,
    }


def main() -> int:
    """Print the report for OntoGUM test and LitBank fold-0 test."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--stride", type=int, default=512)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    reports = [evaluate(c, args.window, args.stride) for c in (ontogum("test"), litbank("test", 0))]
    if args.json:
        print(json.dumps(reports, indent=2))
        return 0
    for rep in reports:
        print(f"{rep['corpus']} {rep['split']} ({rep['documents']} docs): CoNLL F1 {100 * rep['conll_f1']:.2f}, "
              f"LEA F1 {100 * rep['lea'][2]:.2f}, Span-EM {100 * rep['span_em']:.2f}, "
              f"link recall {100 * rep['link_recall']:.2f}")  # fmt: skip
        for g, row in rep["groups"].items():
            if row["links"]:
                print(f"  {g:>8}: {row['links']:5d} links  Span-EM {100 * row['span_em']:6.2f}  "
                      f"link recall {100 * row['link_recall']:6.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
