"""`longctx-eval coref-score KEY RESPONSE [--json]`: the CoNLL-2012 scorer's numbers for two CoNLL files.

Either file may be CoNLL-2012 (OntoNotes), LitBank or OntoGUM-upstream layout. Documents are matched by
name (the text after `#begin document`); key documents missing from the response score as empty and
response documents missing from the key are ignored, as the official scorer does. Singletons get the key's
treatment on both sides (`--singletons auto`, the default): a key that annotates none (the OntoNotes scheme) has
the response's singletons dropped before scoring, a key that has some keeps the response's; `keep` scores the
files as they are, as the official scorer does. Registered on the CLI
through the `longctx_eval.commands` entry point (`add_parser`); also runnable as
`python -m data_builders.coref.score_command KEY RESPONSE`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from data_builders.coref.conll import read_conll
from longctx_eval.errors import LongctxError
from longctx_eval.metrics.coref import ALL_METRICS, MAX_REPEATS, document_counts, scores_from_counts, sum_counts

LABELS = {
    "muc": "MUC",
    "bcub": "B-cubed",
    "ceafm": "CEAF-m",
    "ceafe": "CEAF-e",
    "blanc": "BLANC",
    "lea": "LEA",
    "mentions": "Mentions",
    "conll": "CoNLL F1",
}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `coref-score` on the CLI's subparsers."""
    p = subparsers.add_parser("coref-score", help="score a CoNLL coreference response against a key file")
    p.add_argument("key", type=Path, help="gold CoNLL file (CoNLL-2012, LitBank or OntoGUM layout)")
    p.add_argument("response", type=Path, help="system CoNLL file with the same documents and tokens")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--strict-repeats",
        action="store_true",
        help=f"refuse, as the official scorer does, when more than {MAX_REPEATS} response mentions repeat",
    )
    p.add_argument(
        "--singletons",
        choices=SINGLETON_RULES,
        default="auto",
        help="auto (default): drop the response's singletons when the key has none; keep: score both as they are; "
        "drop: drop singletons from both",
    )
    p.set_defaults(func=cmd_coref_score)
    return p


SINGLETON_RULES = ("auto", "keep", "drop")


def _without_singletons(clusters: Sequence[Sequence]) -> list:
    return [c for c in clusters if len(c) > 1]


def score_files(key: Path, response: Path, strict_repeats: bool = False, singletons: str = "auto") -> dict:
    """Scores, summed counts and document bookkeeping for a key and a response file.

    `singletons`: auto drops the response's singletons when no key document has one (the key's scheme annotates
    none), keep leaves both files as they are (the official scorer), drop removes them from both.
    """
    if singletons not in SINGLETON_RULES:
        raise LongctxError(f"singletons={singletons!r}: expected one of {', '.join(SINGLETON_RULES)}")
    key_docs = read_conll(key)
    resp_docs = {d.name: d for d in read_conll(response)}
    key_has = any(len(c) == 1 for d in key_docs for c in d.clusters)
    drop_response = singletons == "drop" or (singletons == "auto" and not key_has)
    dropped = 0
    per_doc = []
    for doc in key_docs:
        other = resp_docs.get(doc.name)
        if other is not None and len(other.tokens) != len(doc.tokens):
            raise LongctxError(
                f"{response}:{other.line}: document {doc.name!r} has {len(other.tokens)} tokens but the key "
                f"({key}:{doc.line}) has {len(doc.tokens)}; expected the key's tokenization"
            )
        key_side = _without_singletons(doc.clusters) if singletons == "drop" else list(doc.clusters)
        resp_side = list(other.clusters) if other else []
        if drop_response:
            dropped += len(resp_side) - len(_without_singletons(resp_side))
            resp_side = _without_singletons(resp_side)
        per_doc.append(document_counts(key_side, resp_side))
    total = sum_counts(per_doc)
    if strict_repeats and total["repeats"] > MAX_REPEATS:
        raise LongctxError(
            f"{response}: {int(total['repeats'])} response mentions repeat a span already matched to the key; "
            f"the official scorer refuses to score more than {MAX_REPEATS}"
        )
    names = {d.name for d in key_docs}
    return {
        "key": str(key),
        "response": str(response),
        "documents": len(key_docs),
        "missing_in_response": sorted(names - resp_docs.keys()),
        "ignored_response_documents": sorted(resp_docs.keys() - names),
        "scores": scores_from_counts(total),
        "counts": total,
        "singletons": {"rule": singletons, "key_has_singletons": key_has, "response_singletons_dropped": dropped},
    }


def _table(result: dict) -> str:
    c = result["counts"]
    lines = [f"{'metric':<10} {'recall':>8} {'precision':>10} {'F1':>8}   counts (recall; precision)"]
    for m in ALL_METRICS:
        r, p, f = result["scores"][m]
        if m in ("blanc", "conll"):
            detail = "mean of MUC, B-cubed, CEAF-e" if m == "conll" else _blanc_detail(c)
        else:
            detail = f"{c[m + '_rn']:g} / {c[m + '_rd']:g}; {c[m + '_pn']:g} / {c[m + '_pd']:g}"
        lines.append(f"{LABELS[m]:<10} {100 * r:8.2f} {100 * p:10.2f} {100 * f:8.2f}   {detail}")
    notes = [f"{result['documents']} key document(s)"]
    if result["missing_in_response"]:
        notes.append(f"{len(result['missing_in_response'])} missing from the response (scored as empty)")
    if result["ignored_response_documents"]:
        notes.append(f"{len(result['ignored_response_documents'])} response document(s) not in the key (ignored)")
    if c["repeats"]:
        notes.append(f"{int(c['repeats'])} repeated response mention(s) dropped")
    if result["singletons"]["response_singletons_dropped"]:
        n = result["singletons"]["response_singletons_dropped"]
        notes.append(f"{n} response singleton(s) dropped: the key annotates none (--singletons keep scores them)")
    return "\n".join([*lines, "; ".join(notes)])


def _blanc_detail(c: dict) -> str:
    return (
        f"coref {c['blanc_c_num']:g}/{c['blanc_c_key']:g}, {c['blanc_c_num']:g}/{c['blanc_c_resp']:g}; "
        f"non-coref {c['blanc_n_num']:g}/{c['blanc_n_key']:g}, {c['blanc_n_num']:g}/{c['blanc_n_resp']:g}"
    )


def cmd_coref_score(args: argparse.Namespace) -> int:
    """Print the scores of RESPONSE against KEY as a table or JSON; 0 on success."""
    result = score_files(
        args.key,
        args.response,
        strict_repeats=getattr(args, "strict_repeats", False),
        singletons=getattr(args, "singletons", "auto"),
    )
    if args.json:
        out = {
            **{k: v for k, v in result.items() if k not in ("scores", "counts")},
            "metrics": {
                m: dict(zip(("recall", "precision", "f1"), v, strict=True)) for m, v in result["scores"].items()
            },
            "counts": result["counts"],
        }
        print(json.dumps(out, indent=2, sort_keys=True))
    else:
        print(_table(result))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point (`python -m data_builders.coref.score_command KEY RESPONSE`)."""
    parser = argparse.ArgumentParser(prog="longctx-eval")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["coref-score", *(sys.argv[1:] if argv is None else argv)])
    try:
        return cmd_coref_score(args)
    except LongctxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
