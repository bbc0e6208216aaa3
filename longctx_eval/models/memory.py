"""Peak resident memory of a block of code on Linux, by resetting the kernel's high-water mark."""

from __future__ import annotations

import resource
from pathlib import Path
from types import TracebackType

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def _status_kb(field: str) -> int | None:
    """A kB field of /proc/self/status (VmHWM: peak resident set, VmRSS: current); None where unreadable."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakRSS:
    """`with PeakRSS() as p: ...` then `p.megabytes`: the process's peak RSS during the block.

    `p.start_megabytes` is the RSS on entry, so `p.megabytes - p.start_megabytes` is what the block added at its
    peak (memory the allocator kept from earlier blocks counts in the start, not in the growth).

    Writing 5 to /proc/self/clear_refs resets VmHWM (Linux >= 4.0); where that is not allowed, the value is
    the process's lifetime peak (ru_maxrss), an upper bound, and `exact` is False.
    """

    def __init__(self) -> None:
        self.megabytes = 0.0
        self.start_megabytes = 0.0
        self.exact = False

    def __enter__(self) -> PeakRSS:
        rss = _status_kb("VmRSS")
        self.start_megabytes = round(rss / 1024.0, 1) if rss is not None else 0.0
        try:
            _CLEAR_REFS.write_text("5")
            self.exact = True
        except OSError:
            self.exact = False
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        hwm = _status_kb("VmHWM") if self.exact else None
        kb = hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.megabytes = round(kb / 1024.0, 1)
