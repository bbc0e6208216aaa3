"""Which machine a timing came from: the processor's fingerprint and a short calibration of its speed, so that
seconds from different sittings are compared only where the machine was the same: two sessions of this project, on
machines of one kind, measured the same `hf:` pass 2.5x apart."""

from __future__ import annotations

import platform
from pathlib import Path

CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "amx_tile")
"""The instruction sets that change which kernels torch and vLLM run on a CPU (and so their speed several-fold)."""


def cpu_fingerprint(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, str]:
    """The processor the numbers came from: its model name and number and the kernel-relevant instruction sets;
    seconds measured on different fingerprints are not compared."""
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text().splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() in ("model name", "model", "flags") and key.strip() not in fields:
                fields[key.strip()] = value.strip()
    except OSError:
        return {"model": platform.processor() or platform.machine(), "isa": ""}
    flags = set(fields.get("flags", "").split())
    name = fields.get("model name", platform.machine())
    return {
        "model": f"{name} (model {fields['model']})" if "model" in fields else name,
        "isa": " ".join(f for f in CPU_FEATURES if f in flags),
    }


def matmul_gflops(n: int = 1024, seconds: float = 1.0) -> float:
    """fp32 matrix-product speed of this process's torch threads right now: a calibration recorded beside timings, so
    two sittings' seconds are compared only where the machine did the same work at the same speed."""
    import time

    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # first call: allocation and kernel choice
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, b)
        reps += 1
    return round(2 * n**3 * reps / (time.perf_counter() - t0) / 1e9, 1)
