"""One results file for a `vllm` grid measured over several sittings (`--vllm-backends hf`, then `vllm`, then
`served`): a sitting adds or replaces the backends it ran and keeps those an earlier sitting of the same grid and
lever set measured, each backend dated by the sitting that measured it, and the summary is recomputed over them all.
"""

from __future__ import annotations

from typing import Any

from benchmarks.machine import cpu_fingerprint, matmul_gflops
from benchmarks.vllm_summary import summarize

ORDER = ("hf", "vllm", "lm_eval", "served")
SAME_SPEED = 0.15
"""Largest relative difference of two sittings' matrix-product calibrations still taken as one machine's speed."""


def machine() -> dict[str, Any]:
    """The processor (model, kernel-relevant instruction sets) and its fp32 matrix-product speed now."""
    return {**cpu_fingerprint(), "matmul_gflops": matmul_gflops()}


def sitting(part: dict[str, Any], date_utc: str, here: bool = True) -> dict[str, Any]:
    """A sitting as recorded: when it began, which backends it ran, the load average around each, and (`here`: the
    sitting now running) the machine."""
    record = {
        "date_utc": date_utc,
        "backends": list(part.get("backends", {})),
        "load_average_1min": part.get("load_average_1min", {}),
    }
    return record | ({"machine": machine()} if here else {})


def same_machine(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two sittings' machine records show one processor at one speed; an unrecorded machine never does."""
    if not a or not b or (a.get("model"), a.get("isa")) != (b.get("model"), b.get("isa")):
        return False
    x, y = a.get("matmul_gflops"), b.get("matmul_gflops")
    return bool(x and y) and abs(x - y) / max(x, y) <= SAME_SPEED


def compare_within_machines(part: dict[str, Any]) -> dict[str, Any]:
    """`part` with lm-eval's time over each backend's kept only where both were measured on the same machine; where
    not, the ratio moves to `peer_over_ours_other_machine` (shown, marked, never as a comparison)."""
    sittings = part.get("sittings") or []
    if len(sittings) < 2 or "lm_eval" not in part.get("summary", {}):
        return part
    where = {name: s.get("machine") for s in sittings for name in s.get("backends", [])}
    summary = {}
    for name, e in part["summary"].items():
        if "peer_over_ours" in e and name != "lm_eval" and not same_machine(where.get(name), where.get("lm_eval")):
            e = {k: v for k, v in e.items() if k != "peer_over_ours"} | {
                "peer_over_ours_other_machine": e["peer_over_ours"]
            }
        summary[name] = e
    return {**part, "summary": summary}


def merge_sittings(part: dict[str, Any], earlier: dict[str, Any] | None, date_utc: str) -> dict[str, Any]:
    """`part` (this sitting's vllm result) with the backends of `earlier` (the results file of the same grid, as
    written, or None) that this sitting did not run; the summary over the union. A different grid or lever set, or
    an earlier file that measured nothing, is replaced whole."""
    if "skipped" in part:
        return part
    now = sitting(part, date_utc)
    old = (earlier or {}).get("vllm", {})
    same = old.get("grid") == part.get("grid") and old.get("levers", "all") == part.get("levers", "all")
    if not same or "backends" not in old:
        return {**part, "sittings": [now]}
    failed = {name: res["error"] for name, res in part["backends"].items() if "error" in res}
    measured = {name for name, res in old["backends"].items() if "error" not in res}
    ran = {name for name in part["backends"] if name not in failed or name not in measured}
    if failed:  # a backend that failed now keeps an earlier sitting's measurement, the failure noted
        now["failed"] = failed
    kept = {name: res for name, res in old["backends"].items() if name not in ran}
    if not kept:
        return {**part, "sittings": [now]}
    now["backends"] = [b for b in now["backends"] if b in ran]
    date = (earlier or {}).get("environment", {}).get("date_utc", "")
    before = old.get("sittings") or [sitting(old, date, here=False)]  # from before sittings were kept
    sittings = []
    for s in before:
        names = [b for b in s["backends"] if b in kept]
        if names:
            sittings.append({**s, "backends": names})
    merged = {**kept, **{name: res for name, res in part["backends"].items() if name in ran}}
    backends = {name: merged[name] for name in sorted(merged, key=lambda n: (ORDER + (n,)).index(n))}
    merged_part = {
        **part,
        "backends": backends,
        "summary": summarize(backends, part["prefix_bound"]),
        "sittings": [*sittings, now],
    }
    return compare_within_machines(merged_part)


def measured_now(part: dict[str, Any], ran: list[str]) -> list[str]:
    """The backends of `ran` whose result this sitting wrote (not failed), whose checkpoints may go: a failed job
    keeps its finished passes for the next sitting to resume from."""
    failed = set((part.get("sittings") or [{}])[-1].get("failed", {}))
    failed |= {name for name, res in part.get("backends", {}).items() if "error" in res}
    return [b for b in ran if b not in failed]


def _machine_text(m: dict[str, Any] | None) -> str:
    if not m:
        return "machine not recorded"
    speed = f", fp32 matmul {m['matmul_gflops']} GFLOP/s" if m.get("matmul_gflops") else ""
    note = f" ({m['note']})" if m.get("note") else ""
    return f"{m.get('model')}, {m.get('isa') or 'no AVX2'}{speed}{note}"


def sittings_line(part: dict[str, Any]) -> str:
    """Markdown: each sitting's date, backends, machine and 1-minute load averages (one line when there was one),
    and which seconds may not be compared because their sittings ran on different or unrecorded machines."""
    shown = []
    sittings = part.get("sittings", [])
    for s in sittings:
        load = ", ".join(f"{k} {v}" for k, v in s.get("load_average_1min", {}).items())
        failed = "".join(f"; {k} failed: {v}" for k, v in s.get("failed", {}).items())
        shown.append(
            f"{s.get('date_utc', '')} ({', '.join(s['backends'])}; {_machine_text(s.get('machine'))}; "
            f"1-minute load average: {load}{failed})"
        )
    if not shown:
        return ""
    head = "Measured in one sitting" if len(shown) == 1 else f"Measured in {len(shown)} sittings"
    line = f"{head}: " + "; ".join(shown) + ".\n"
    groups: list[list[dict[str, Any]]] = []  # sittings whose machines compare, in order
    for s in sittings:
        group = next((g for g in groups if same_machine(s.get("machine"), g[0].get("machine"))), None)
        if group is None:
            groups.append([s])
        else:
            group.append(s)
    if len(groups) > 1:
        names = [" + ".join(b for s in g for b in s["backends"]) for g in groups]
        line += (
            "\nThese sittings ran on different or unrecorded machines (groups: "
            + "; ".join(names)
            + "): seconds per sample compare only within a group, and lm-eval's time over a backend measured on "
            "another machine is shown in brackets, not as a comparison. Each row's lever speed-ups and shares of "
            "the bound compare passes of one sitting and stand.\n"
        )
    return line
