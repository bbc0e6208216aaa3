"""Coref scorer speed: all of LitBank's gold vs a seeded perturbed response, timed end to end.

    python -m benchmarks.coref_speed [--repeat 3] [--scorer-pl PATH/scorer.pl]

With --scorer-pl (the official CoNLL-2012 scorer v8.01, not shipped here) both files are also written to a
temporary folder and the Perl scorer is timed on them, one process per metric, to report the speed ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path

from data_builders.coref.conll import CorefDocument, read_conll, write_conll
from data_builders.coref.splits import data_root
from longctx_eval.metrics import score_clusters


def perturb(doc: CorefDocument, rng: random.Random) -> list[list[tuple[int, int]]]:
    """Drop 10% of mentions, move 10% to another entity, add spurious one-token mentions (5%)."""
    clusters = [list(c) for c in doc.clusters]
    out: list[list[tuple[int, int]]] = [[] for _ in clusters]
    for k, c in enumerate(clusters):
        for m in c:
            r = rng.random()
            if r < 0.1:
                continue
            target = rng.randrange(len(clusters)) if r < 0.2 else k
            out[target].append(m)
    taken = {m for c in clusters for m in c}
    for _ in range(max(1, doc.n_mentions // 20)):
        t = rng.randrange(len(doc.tokens))
        if (t, t) not in taken:
            out[rng.randrange(len(out))].append((t, t))
            taken.add((t, t))
    return [c for c in out if c]


def main() -> int:
    """Time score_clusters on LitBank (and the Perl scorer when given); print one JSON line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scorer-pl", type=Path, default=None)
    args = ap.parse_args()
    docs = [d for p in sorted((data_root() / "litbank" / "coref" / "conll").glob("*.conll")) for d in read_conll(p)]
    rng = random.Random(0)
    responses = [perturb(d, rng) for d in docs]
    key = [[(d.name, s, e) for s, e in c] for d in docs for c in d.clusters]
    resp = [[(d.name, s, e) for s, e in c] for d, r in zip(docs, responses, strict=True) for c in r]
    times, cpu = [], []
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        scores = score_clusters(key, resp, documents=[d.name for d in docs])
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    report = {
        "benchmark": "coref_speed",
        "documents": len(docs),
        "key_mentions": sum(len(c) for c in key),
        "seconds_best": round(min(times), 4),
        "cpu_seconds_best": round(min(cpu), 4),  # wall time includes waiting for a busy machine
        "conll_f1": round(scores["conll"][2], 6),
    }
    if args.scorer_pl:
        report.update(_perl(args.scorer_pl, docs, responses))
        report["speedup_wall"] = round(report["perl_seconds"] / report["seconds_best"], 1)
    print(json.dumps(report))
    return 0


def _perl(scorer: Path, docs: list[CorefDocument], responses: list) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        key_file, resp_file = Path(tmp) / "key.conll", Path(tmp) / "resp.conll"
        write_conll(key_file, docs)
        write_conll(resp_file, docs, responses)
        t0 = time.perf_counter()
        for metric in ("muc", "bcub", "ceafm", "ceafe", "blanc"):
            subprocess.run(["perl", str(scorer), metric, str(key_file), str(resp_file), "none"], check=True,
                           capture_output=True, cwd=scorer.parent)  # fmt: skip
        return {"perl_seconds": round(time.perf_counter() - t0, 2)}


if __name__ == "__main__":
    raise SystemExit(main())
