"""Coreference metrics that agree with the official CoNLL-2012 scorer v8.01 (and LEA, Moosavi & Strube 2016).

`score_clusters(key, response)` returns (recall, precision, f1) for muc, bcub, ceafm, ceafe, blanc, lea,
mentions and conll. The scorer's rules, all kept: every document is scored on its own and numerators and
denominators are summed over documents before R, P and F1 (so BLANC never links across documents);
mentions match on exact (doc, start, end) only; a missing or spurious mention only enters denominators;
a response mention that repeats a span already matched to the key is dropped (first occurrence, in entity
order, wins) while a repeated span that is not in the key counts at every occurrence; a zero denominator
gives 0 and F1 is 0 when R + P = 0. `document_counts` gives one document's numerators and denominators,
which is what a task's per-sample score carries so corpus metrics (and their bootstrap) are exact sums.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, cast

from longctx_eval.errors import DataError
from longctx_eval.metrics.coref_blanc import blanc_counts, blanc_from_counts
from longctx_eval.metrics.coref_ceaf import ceaf_counts

Mention = tuple[str, int, int]
"""(doc_id, start, end), end inclusive, in tokens of the document."""
Chain = Sequence[Hashable]

METRICS = ("muc", "bcub", "ceafm", "ceafe", "lea", "mentions")
"""Metrics whose R and P are plain ratios of summed counts: `{m}_rn/{m}_rd` and `{m}_pn/{m}_pd`."""
ALL_METRICS = (*METRICS, "blanc", "conll")
MAX_REPEATS = 10
"""The official scorer refuses to score a collection with more removed repeats than this (strict mode)."""


def prepare(keys: Sequence[Chain], responses: Sequence[Chain]) -> tuple[list[list], list[list], dict[str, float]]:
    """The scorer's mention identification: de-duplicated response chains and the mention counts."""
    key_spans = {m for k in keys for m in k}
    matched: set[Hashable] = set()
    kept_chains: list[list] = []
    repeats = 0
    for chain in responses:
        kept = []
        for m in chain:
            if m in matched:
                repeats += 1  # a second occurrence of a span already matched to the key is dropped
                continue
            if m in key_spans:
                matched.add(m)
            kept.append(m)
        if kept:
            kept_chains.append(kept)
    counts = {
        "mentions_rn": float(len(matched)),
        "mentions_rd": float(len(key_spans)),
        "mentions_pn": float(len(matched)),
        "mentions_pd": float(len({m for r in responses for m in r})),
        "repeats": float(repeats),
    }
    return [list(k) for k in keys if len(k)], kept_chains, counts


def _last_chain(chains: Sequence[Chain]) -> dict[Hashable, int]:
    """Mention -> index of the last chain holding it (the scorer's Indexa)."""
    return {m: i for i, c in enumerate(chains) for m in c}


def muc_counts(keys: Sequence[Chain], responses: Sequence[Chain]) -> dict[str, float]:
    """MUC (Vilain et al. 1995): links recovered; twinless mentions and singletons add no link."""
    key_of = _last_chain(keys)
    correct = 0
    for r in responses:
        seen: set[int] = set()
        for m in r:
            k = key_of.get(m)
            if k is not None:
                if k in seen:
                    correct += 1  # each further mention of a key chain already seen adds one link
                else:
                    seen.add(k)
    key_links = sum(len(k) - 1 for k in keys if len(k))
    resp_links = sum(len(r) - 1 for r in responses if len(r))
    return {"muc_rn": correct, "muc_rd": key_links, "muc_pn": correct, "muc_pd": resp_links}


def bcub_counts(keys: Sequence[Chain], responses: Sequence[Chain]) -> dict[str, float]:
    """B-cubed (Bagga & Baldwin 1998), accumulated over response mentions exactly as the scorer does."""
    key_of = _last_chain(keys)
    key_sets = [set(k) for k in keys]
    acc_r = acc_p = 0.0
    for r in responses:
        overlap: dict[int, int] = {}
        for m in r:
            k = key_of.get(m)
            if k is None:
                continue  # a spurious mention: 0 to precision, counted in its denominator
            if k not in overlap:
                overlap[k] = sum(1 for x in r if x in key_sets[k])
            acc_p += overlap[k] / len(r)
            acc_r += overlap[k] / len(keys[k])
    return {
        "bcub_rn": acc_r,
        "bcub_rd": float(sum(len(k) for k in keys)),
        "bcub_pn": acc_p,
        "bcub_pd": float(sum(len(r) for r in responses)),
    }


def _lea_side(chains: Sequence[Chain], other: Sequence[Chain]) -> tuple[float, float]:
    """LEA numerator and denominator of `chains` resolved against `other` (recall: key vs response)."""
    other_of = _last_chain(other)
    num = den = 0.0
    for c in chains:
        n = len(c)
        if n == 1:
            j = other_of.get(c[0])
            resolved = 1.0 if j is not None and len(other[j]) == 1 else 0.0
            num += resolved  # a singleton is resolved iff it is a singleton on the other side too
        else:
            groups: dict[int, int] = {}
            for m in c:
                j = other_of.get(m)
                if j is not None:
                    groups[j] = groups.get(j, 0) + 1
            common = sum(g * (g - 1) // 2 for g in groups.values())
            num += n * common / (n * (n - 1) / 2)
        den += n
    return num, den


def lea_counts(keys: Sequence[Chain], responses: Sequence[Chain]) -> dict[str, float]:
    """LEA (Moosavi & Strube 2016): entity size times the share of its links resolved, singletons included."""
    rn, rd = _lea_side(keys, responses)
    pn, pd = _lea_side(responses, keys)
    return {"lea_rn": rn, "lea_rd": rd, "lea_pn": pn, "lea_pd": pd}


def document_counts(key: Sequence[Chain], response: Sequence[Chain]) -> dict[str, float]:
    """Every numerator and denominator of one document's score; mentions are any hashable (e.g. (start, end))."""
    keys, responses, counts = prepare(key, response)
    out = dict(counts)
    out.update(muc_counts(keys, responses))
    out.update(bcub_counts(keys, responses))
    c = ceaf_counts(keys, responses)
    out.update(
        ceafm_rn=c["ceafm_num"], ceafm_rd=c["ceafm_key"], ceafm_pn=c["ceafm_num"], ceafm_pd=c["ceafm_resp"],
        ceafe_rn=c["ceafe_num"], ceafe_rd=c["ceafe_key"], ceafe_pn=c["ceafe_num"], ceafe_pd=c["ceafe_resp"],
    )  # fmt: skip
    out.update(lea_counts(keys, responses))
    out.update(blanc_counts(keys, responses))
    return {k: float(v) for k, v in out.items()}


def count_fields() -> tuple[str, ...]:
    """Names of every field `document_counts` returns."""
    ratio = tuple(f"{m}_{s}" for m in METRICS for s in ("rn", "rd", "pn", "pd"))
    blanc = tuple(f"blanc_{k}_{w}" for k in "cn" for w in ("num", "key", "resp"))
    return (*ratio, *blanc, "repeats")


def f1(recall: float, precision: float) -> float:
    """Harmonic mean; 0 when recall + precision is 0."""
    return 2 * recall * precision / (recall + precision) if recall + precision else 0.0


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def scores_from_counts(total: Mapping[str, float]) -> dict[str, tuple[float, float, float]]:
    """(R, P, F1) of every metric from numerators and denominators summed over documents."""
    out: dict[str, tuple[float, float, float]] = {}
    for m in METRICS:
        r, p = _ratio(total[f"{m}_rn"], total[f"{m}_rd"]), _ratio(total[f"{m}_pn"], total[f"{m}_pd"])
        out[m] = (r, p, f1(r, p))
    out["blanc"] = blanc_from_counts(dict(total))
    trio = [out[m] for m in ("muc", "bcub", "ceafe")]
    means = tuple(sum(t[i] for t in trio) / 3 for i in range(3))  # mean R, mean P, mean of the F1s
    out["conll"] = cast(tuple[float, float, float], means)
    return out


def sum_counts(per_doc: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Field-wise sum of per-document counts."""
    total = dict.fromkeys(count_fields(), 0.0)
    for c in per_doc:
        for k, v in c.items():
            total[k] = total.get(k, 0.0) + v
    return total


def group_by_document(clusters: Iterable[Iterable[Mention]], role: str) -> dict[str, list[list[tuple[int, int]]]]:
    """Split clusters of (doc, start, end) mentions into per-document chains of (start, end)."""
    docs: dict[str, list[list[tuple[int, int]]]] = defaultdict(list)
    for n, cluster in enumerate(clusters):
        per_doc: dict[str, list[tuple[int, int]]] = {}
        try:
            for doc, start, end in cluster:
                if not 0 <= start <= end:
                    raise ValueError
                per_doc.setdefault(doc if type(doc) is str else str(doc), []).append((int(start), int(end)))
        except (TypeError, ValueError):
            bad = next((m for m in cluster if not _valid(m)), cluster)
            raise DataError(
                f"{role} cluster {n}: mention {bad!r} is not (doc_id, start, end) with 0 <= start <= end; "
                "expected e.g. ('d1', 4, 6)"
            ) from None
        for doc, chain in per_doc.items():  # a cluster spanning documents is one chain in each
            docs[doc].append(chain)
    return docs


def _valid(m: object) -> bool:
    try:
        _, start, end = cast(Any, m)
        return 0 <= int(start) <= int(end)
    except (TypeError, ValueError):
        return False


def score_clusters(
    key: Iterable[Iterable[Mention]],
    response: Iterable[Iterable[Mention]],
    *,
    documents: Iterable[str] | None = None,
    strict_repeats: bool = False,
) -> dict[str, tuple[float, float, float]]:
    """(recall, precision, f1) per metric, agreeing with the CoNLL-2012 scorer v8.01 and LEA.

    `documents` are the key's documents (default: those with a key mention); response mentions in other
    documents are ignored, as the scorer ignores response documents absent from the key. With
    `strict_repeats`, more than 10 dropped repeats raise DataError, as the scorer refuses to score then.
    """
    keys = group_by_document(key, "key")
    responses = group_by_document(response, "response")
    names = list(keys) if documents is None else list(dict.fromkeys(documents))
    per_doc = [document_counts(keys.get(d, []), responses.get(d, [])) for d in names]
    total = sum_counts(per_doc)
    if strict_repeats and total["repeats"] > MAX_REPEATS:
        raise DataError(
            f"the response repeats {int(total['repeats'])} mentions already matched to the key; the official "
            f"scorer refuses to score more than {MAX_REPEATS} repeats"
        )
    return scores_from_counts(total)
