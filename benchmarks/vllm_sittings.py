"""One results file for a `vllm` grid measured over several sittings (`--vllm-backends hf`, then `vllm`, then
`served`): a sitting adds or replaces the backends it ran and keeps those an earlier sitting of the same grid and
lever set measured, each backend dated by the sitting that measured it, and the summary is recomputed over them all.
"""

from __future__ import annotations

from typing import Any

ORDER = ("hf", "vllm", "lm_eval", "served")


def sitting(part: dict[str, Any], date_utc: str) -> dict[str, Any]:
    """This sitting as recorded: when it began, which backends it ran, the load average around each."""
    return {
        "date_utc": date_utc,
        "backends": list(part.get("backends", {})),
        "load_average_1min": part.get("load_average_1min", {}),
    }


def merge_sittings(part: dict[str, Any], earlier: dict[str, Any] | None, date_utc: str) -> dict[str, Any]:
    """`part` (this sitting's vllm result) with the backends of `earlier` (the results file of the same grid, as
    written, or None) that this sitting did not run; the summary over the union. A different grid or lever set, or
    an earlier file that measured nothing, is replaced whole."""
    from benchmarks.vllm_backends import summarize

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
    before = old.get("sittings") or [sitting(old, (earlier or {}).get("environment", {}).get("date_utc", ""))]
    sittings = []
    for s in before:
        names = [b for b in s["backends"] if b in kept]
        if names:
            sittings.append({**s, "backends": names})
    merged = {**kept, **{name: res for name, res in part["backends"].items() if name in ran}}
    backends = {name: merged[name] for name in sorted(merged, key=lambda n: (ORDER + (n,)).index(n))}
    return {
        **part,
        "backends": backends,
        "summary": summarize(backends, part["prefix_bound"]),
        "sittings": [*sittings, now],
    }


def measured_now(part: dict[str, Any], ran: list[str]) -> list[str]:
    """The backends of `ran` whose result this sitting wrote (not failed), whose checkpoints may go: a failed job
    keeps its finished passes for the next sitting to resume from."""
    failed = set((part.get("sittings") or [{}])[-1].get("failed", {}))
    failed |= {name for name, res in part.get("backends", {}).items() if "error" in res}
    return [b for b in ran if b not in failed]


def sittings_line(part: dict[str, Any]) -> str:
    """Markdown: each sitting's date, backends and 1-minute load averages (one line when there was one)."""
    shown = []
    for s in part.get("sittings", []):
        load = ", ".join(f"{k} {v}" for k, v in s.get("load_average_1min", {}).items())
        failed = "".join(f"; {k} failed: {v}" for k, v in s.get("failed", {}).items())
        shown.append(f"{s.get('date_utc', '')} ({', '.join(s['backends'])}; 1-minute load average: {load}{failed})")
    if not shown:
        return ""
    head = "Measured in one sitting" if len(shown) == 1 else f"Measured in {len(shown)} sittings"
    return f"{head}: " + "; ".join(shown) + ".\n"
