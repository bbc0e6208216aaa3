"""Where a model runs: `device=auto|cpu|cuda|cuda:N` resolved once, and the checks that refuse an impossible one.

`auto` is CUDA when torch sees a CUDA device, else the CPU, so a machine without a GPU runs exactly as before.
Checking a spec imports torch only when the spec names CUDA itself (`check_device`); resolving `auto` imports it
at load time, never while a spec is parsed.
"""

from __future__ import annotations

import gc
import re
from typing import Any

from longctx_eval.errors import ConfigError


def _cuda_index(device: str) -> int | None:
    match = re.fullmatch(r"cuda(?::([0-9]+))?", device)
    if match is None:
        return None
    return int(match.group(1) or 0)


def check_device(device: str, raw: str) -> None:
    """Before anything loads: a CUDA device that this machine does not have is a one-line ConfigError."""
    index = _cuda_index(device)
    if index is None:
        return
    import torch

    if not torch.cuda.is_available():
        built = (
            f"torch {torch.__version__} built with CUDA {torch.version.cuda}"
            if torch.version.cuda
            else (f"torch {torch.__version__} is a CPU-only build")
        )
        raise ConfigError(
            f"model spec {raw!r}: device={device} but this machine has no usable CUDA device ({built}); "
            "use device=cpu, or device=auto (CUDA when there is one)"
        )
    count = torch.cuda.device_count()
    if index >= count:
        raise ConfigError(
            f"model spec {raw!r}: device={device} but this machine has {count} CUDA device(s) "
            f"(cuda:0..cuda:{count - 1})"
        )


def resolve_device(device: str) -> str:
    """The concrete device of a `device` option: `auto` -> `cuda:0` when CUDA is available, else `cpu`."""
    if device == "auto":
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    index = _cuda_index(device)
    return f"cuda:{index}" if index is not None else device


def model_device(model: Any) -> Any:
    """The torch device a model's inputs go to: that of its input embeddings (the first layer under device_map)."""
    try:
        return model.get_input_embeddings().weight.device
    except (AttributeError, NotImplementedError):
        return next(model.parameters()).device


def cuda_devices(model: Any) -> list[Any]:
    """The distinct CUDA devices holding the model's parameters (several under device_map), in index order."""
    seen = {p.device for p in model.parameters() if p.device.type == "cuda"}
    return sorted(seen, key=lambda d: d.index or 0)


def free_device_memory() -> None:
    """Return freed blocks to the device (after an out-of-memory error): garbage-collect, then empty the CUDA cache."""
    import torch

    gc.collect()
    torch.cuda.empty_cache()  # a no-op where CUDA was never initialised (the CPU)


class DevicePeak:
    """`with DevicePeak(devices) as p: ...` then `p.megabytes`: peak allocated CUDA memory in the block, summed over
    the devices (None on the CPU, where PeakRSS measures memory instead)."""

    def __init__(self, devices: list[Any]) -> None:
        self.devices = devices
        self.megabytes: float | None = None

    def __enter__(self) -> DevicePeak:
        if self.devices:
            import torch

            for d in self.devices:
                torch.cuda.reset_peak_memory_stats(d)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.devices:
            import torch

            total = sum(torch.cuda.max_memory_allocated(d) for d in self.devices)
            self.megabytes = round(total / 2**20, 1)


def synchronize(device: Any) -> None:
    """Wait for queued CUDA work on `device` (so a timestamp means the work is done); nothing on the CPU."""
    if getattr(device, "type", None) == "cuda":
        import torch

        torch.cuda.synchronize(device)


def device_name(device: str) -> str:
    """A human name for the run file: the GPU's product name, or 'cpu'."""
    index = _cuda_index(device)
    if index is None:
        return device
    import torch

    return torch.cuda.get_device_name(index)
