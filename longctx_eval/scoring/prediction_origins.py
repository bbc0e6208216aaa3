"""Where a task's predictions came from, for its throughput: computed in the run that wrote the run file, resumed
from an earlier run of the folder, or served from an index someone else built (a retriever's `data.index_cache`:
read from the disk cache an earlier process filled, or from this process's memory when no prediction of the task
built one: another model with the same weights built them earlier in the same command).

A task's seconds sum each prediction's own model time, so a resumed prediction counts the time it took then, but
one served from a cached index leaves out building that index: two runs of the same weights can differ 90-fold.
The runner stamps each prediction with when it was saved (`saved`, to the second, as the task's `started`); a
prediction saved before its task's run started was resumed (one saved by a run that ended in the very second the
next one started reads as computed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _index_cache(record: Mapping[str, Any]) -> str | None:
    data = record.get("data")
    return data.get("index_cache") if isinstance(data, Mapping) else None


def origin_fields(records: Iterable[Mapping[str, Any]], started: str | None) -> dict[str, Any]:
    """Throughput's `computed` and `resumed` prediction counts (absent when no record says when it was saved: a
    folder written before the stamp) and `cached` (absent when no prediction read an index)."""
    records = list(records)
    out: dict[str, Any] = {}  # ints, typed Any to unpack into Throughput's keyword fields
    statuses = [_index_cache(r) for r in records]
    if any(s is not None for s in statuses):
        elsewhere = {"disk"} if "built" in statuses else {"disk", "memory"}  # memory: built by this task or another's
        out["cached"] = sum(s in elsewhere for s in statuses)
    stamped = [r.get("saved") for r in records]
    if started is not None and any(isinstance(s, str) for s in stamped):
        # an unstamped record predates the stamp, so an earlier run wrote it; ISO-8601 UTC to the second sorts by time
        resumed = sum(not isinstance(s, str) or s < started for s in stamped)
        out |= {"computed": len(records) - resumed, "resumed": resumed}
    return out
