"""Whether a model spec's `device=` option names a device this machine has, checked before anything loads."""

from __future__ import annotations

from longctx_eval.errors import ConfigError
from longctx_eval.models.spec import ModelSpec


def device_problem(device: str) -> str | None:
    """None when torch can place tensors on `device` here, else why not (one clause)."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError, TypeError) as exc:
        return f"not a torch device ({str(exc).strip().splitlines()[0]})"
    if dev.type == "cpu":
        return None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return "this machine's torch has no usable CUDA device"
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            return f"this machine has {count} CUDA device(s), cuda:0..cuda:{count - 1}"
        return None
    backend = getattr(torch.backends, dev.type, None) or getattr(torch, dev.type, None)
    available = getattr(backend, "is_available", None)
    if available is None or not available():
        return f"this machine's torch has no usable {dev.type} device"
    return None


def check_devices(spec: ModelSpec) -> None:
    """A ConfigError naming the option when the spec (or a part of a composite spec) asks for a missing device."""
    for part in (spec, *spec.parts):
        device = getattr(part.options, "device", None)
        if not isinstance(device, str) or device == "cpu":
            continue
        problem = device_problem(device)
        if problem:
            raise ConfigError(
                f"model spec {part.raw!r}: option device={device!r} cannot be used: {problem}; expected cpu or a "
                "device this machine has"
            )
