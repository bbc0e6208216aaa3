"""`vllm serve` of a model folder as the README runs it on CPU: the one command line that the bench's `served` job
(benchmarks/vllm_backends.py) and the `vllm`-marked tests (tests/vllm_runs.py) start. Standard library only."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

SERVED_NAME = "smollm2-135m"
CPU_MEMORY = 0.25
"""--gpu-memory-utilization on CPU: the share of the NUMA node's memory vLLM reserves for its KV cache (its 0.92
default fails on a shared machine: 'Available memory on node 0 ... is less than desired CPU memory utilization')."""
MAX_MODEL_LEN = 8192
"""SmolLM2's trained window, the `hf:` adapter's window too."""
SEED = 0


def server_command(
    model_dir: Path,
    port: int,
    *,
    served_name: str = SERVED_NAME,
    max_model_len: int = MAX_MODEL_LEN,
    memory: float = CPU_MEMORY,
    seed: int = SEED,
    extra: Sequence[str] = (),
    python: str = sys.executable,
) -> list[str]:
    """vLLM's OpenAI-compatible server (`vllm serve` is `python -m vllm.entrypoints.openai.api_server`): fp32, the
    window, prefix caching, vLLM's own neutral sampling defaults (--generation-config vllm), a share of CPU memory,
    on loopback at `port`; `extra` flags appended."""
    return [
        python, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir),
        "--served-model-name", served_name,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32",
        "--max-model-len", str(max_model_len),
        "--enable-prefix-caching",
        "--generation-config", "vllm",
        "--gpu-memory-utilization", str(memory),
        "--seed", str(seed),
        *extra,
    ]  # fmt: skip
