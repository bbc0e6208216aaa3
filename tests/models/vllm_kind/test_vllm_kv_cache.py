"""The `vllm:` KV-cache reservation without vLLM (default suite): bytes per token from the real SmolLM2 config, the
suite's size for the window, who chooses (spec, VLLM_CPU_KVCACHE_SPACE, the suite on CPU, vLLM on a GPU), the one-line
refusal when the memory node cannot give it, what the run file records; and data_parallel_size refused in one line.
The engine runs with it in tests/models/vllm_kind/test_vllm_reservation.py (`make test-vllm`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from vllm_runs import vllm_options as options

from longctx_eval.errors import ConfigError
from longctx_eval.models.vllm.kv_cache import (
    GIB,
    KV_ENV,
    kv_bytes_per_token,
    memory_refusal,
    plan_reservation,
    recorded,
    suite_reservation,
)
from longctx_eval.models.vllm.settings import engine_arguments, rope_override

SMOLLM2_PER_TOKEN = 2 * 30 * 3 * 64 * 4
"""K and V x 30 layers x 3 KV heads x head size 64 x 4 bytes (float32): 46,080 bytes a token."""
SMOLLM2_SUITE = 4 * 8192 * SMOLLM2_PER_TOKEN
"""4 sequences of its 8,192-token window: 1,509,949,440 bytes (1.41 GiB), 256 of vLLM's 128-token CPU blocks."""


@pytest.fixture(scope="module")
def smollm2_config():
    from transformers import AutoConfig

    from longctx_eval.models.assets import smollm2_dir

    return AutoConfig.from_pretrained(str(smollm2_dir()))


def plan(config, query: str = "", cpu: bool = True, environ: dict[str, str] | None = None):
    o = options(query)
    return plan_reservation(o, config, rope_override(o, config), cpu=cpu, environ=environ or {})


def test_bytes_per_token_follow_the_config_and_dtype(smollm2_config):
    assert kv_bytes_per_token(smollm2_config, "float32") == SMOLLM2_PER_TOKEN == 46080
    assert kv_bytes_per_token(smollm2_config, "bfloat16") == kv_bytes_per_token(smollm2_config, "float16") == 23040
    assert kv_bytes_per_token(smollm2_config, "auto") == 46080  # the config's dtype: float32
    # multi-head latent attention (a DeepSeek-V3 shape): one 512 + 64 latent per token and layer, no K/V pair
    mla = SimpleNamespace(num_hidden_layers=61, kv_lora_rank=512, qk_rope_head_dim=64, dtype="torch.bfloat16")
    assert kv_bytes_per_token(mla, "auto") == 61 * 576 * 2


@pytest.mark.parametrize(
    ("query", "window"),
    [
        ("", 8192),
        ("max_model_len=4096", 4096),
        ("rope=linear&rope_factor=2", 16384),
        ("rope=yarn&rope_factor=4", 32768),
        ("rope=yarn&max_model_len=32768", 32768),
    ],
)
def test_on_cpu_the_suite_reserves_four_sequences_of_the_window(smollm2_config, query, window):
    p = plan(smollm2_config, query)
    assert p.chosen_by == "suite" and p.sized_for == {"sequences": 4, "tokens_each": window, "bytes_per_token": 46080}
    assert p.kv_bytes == 4 * window * 46080 and p.engine_kwargs() == {"kv_cache_memory_bytes": p.kv_bytes}
    if not query:
        assert p.kv_bytes == SMOLLM2_SUITE == 1_509_949_440 and f"{p.kv_bytes / GIB:.2f}" == "1.41"


def test_what_the_user_set_is_never_replaced(smollm2_config):
    spec = plan(smollm2_config, "gpu_memory_utilization=0.5")
    assert (spec.chosen_by, spec.gpu_memory_utilization, spec.engine_kwargs()) == ("spec", 0.5, {})
    env = plan(smollm2_config, "gpu_memory_utilization=0.5", environ={KV_ENV: "3"})  # vLLM's CPU setting wins
    assert (env.chosen_by, env.kv_bytes, env.engine_kwargs()) == (KV_ENV, 3 * GIB, {})
    gpu = plan(smollm2_config, "", cpu=False, environ={KV_ENV: "3"})  # on a GPU: vLLM's own default, untouched
    assert (gpu.chosen_by, gpu.kv_bytes, gpu.engine_kwargs()) == ("vllm", None, {})
    assert plan(smollm2_config, "gpu_memory_utilization=0.8", cpu=False).chosen_by == "spec"
    assert plan(smollm2_config, environ={KV_ENV: ""}).chosen_by == "suite"  # set but empty: vLLM ignores it too
    with pytest.raises(ConfigError, match=r"^VLLM_CPU_KVCACHE_SPACE='1.5' is invalid; expected a whole number of GiB"):
        plan(smollm2_config, environ={KV_ENV: "1.5"})


def test_a_reservation_that_is_not_free_is_refused_in_one_line(smollm2_config):
    suite = suite_reservation(options(""), smollm2_config, None)
    total, free = round(23.54 * GIB), round(21.57 * GIB)  # the machine: vLLM's 0.92 asks 21.66 GiB
    line = memory_refusal(plan(smollm2_config, "gpu_memory_utilization=0.92"), suite, total, free)
    assert line == (
        "gpu_memory_utilization=0.92 asks vLLM on CPU to reserve 21.66 GiB and 21.57 GiB of this memory node's "
        "23.54 GiB are free; set gpu_memory_utilization=0.91 or lower, or leave it unset (the suite then reserves "
        "1.41 GiB of KV cache)"
    )
    assert memory_refusal(plan(smollm2_config, "gpu_memory_utilization=0.5"), suite, total, free) is None
    assert memory_refusal(suite, suite, total, free) is None
    assert memory_refusal(suite, suite, total, 1 * GIB) == (
        "the KV cache for 4 sequences of 8192 tokens (1.41 GiB) is more than the 1.00 GiB free on this memory node; "
        "set max_model_len=N (a shorter window), or VLLM_CPU_KVCACHE_SPACE=GiB, or gpu_memory_utilization=F "
        "(vLLM's share of the node)"
    )
    env = memory_refusal(plan(smollm2_config, environ={KV_ENV: "30"}), suite, total, free)
    assert env is not None and env.startswith("VLLM_CPU_KVCACHE_SPACE=30 asks") and "lower it" in env
    assert memory_refusal(plan(smollm2_config, cpu=False), suite, total, 0) is None  # vLLM's default: its own check


def test_the_run_file_records_who_chose_what_and_the_blocks_allocated(smollm2_config):
    assert recorded(plan(smollm2_config), 256, 128, 0.92) == {
        "chosen_by": "suite",
        "requested_bytes": SMOLLM2_SUITE,
        "sized_for": {"sequences": 4, "tokens_each": 8192, "bytes_per_token": 46080},
        "blocks": 256,
        "tokens": 32768,
    }
    spec = recorded(plan(smollm2_config, "gpu_memory_utilization=0.25"), 700, 128, 0.25)
    assert spec == {"chosen_by": "spec", "gpu_memory_utilization": 0.25, "blocks": 700, "tokens": 89600}
    assert recorded(plan(smollm2_config, cpu=False), None, 16, 0.92) == {
        "chosen_by": "vllm",
        "gpu_memory_utilization": 0.92,
    }


def test_data_parallel_is_refused_in_one_line_naming_shards_and_vllm_serve(smollm2_config):
    """Refused when the spec is parsed, before anything loads (vLLM need not be installed)."""
    with pytest.raises(ConfigError) as exc:
        options("data_parallel_size=4")
    line = str(exc.value)
    assert "\n" not in line and "data_parallel_size='4'" in line
    assert "`longctx-eval run --shard I/N`" in line and "`vllm serve MODEL --data-parallel-size N`" in line
    o = options("data_parallel_size=1")  # one replica: fine, and never handed to vLLM
    assert "data_parallel_size" not in engine_arguments(o, smollm2_config)[0]
