"""The probe's memory is linear in length: no op of its forward returns an L x L tensor, and SDPA stays fused.

At SmolLM2's attention geometry (9 query / 3 key-value heads of 64 dims) a single materialised score matrix at
32K tokens is 9 x 32768^2 x 4 B = 36 GiB, so one fallback to the math SDPA kernel (e.g. because of an explicit
mask) would make `make probe-long` impossible on a laptop. A one-layer random model with that geometry shows the
property in seconds: the largest tensor any op returns grows by the length ratio, not its square.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import LlamaConfig, LlamaForCausalLM

from longctx_eval.models.memory import PeakRSS
from longctx_eval.models.posprobe.alibi_attention import alibi_slopes
from longctx_eval.models.posprobe.attention_rows import ATTENTION_NAME
from longctx_eval.models.posprobe.forward import forward_rows

SHORT, LONG = 1024, 4096
RSS_LENGTH = 8192
HEADS = 9
ANSWER_STEPS = 5
FUSED_SDPA = "aten._scaled_dot_product_flash_attention_for_cpu"


class LargestOutput(TorchDispatchMode):
    """Records the largest tensor any dispatched op returns, and the names of the ops."""

    def __init__(self) -> None:
        super().__init__()
        self.numel = 0
        self.op = ""
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's hook signature
        out = func(*args, **(kwargs or {}))
        self.ops.add(str(func.overloadpacket))
        for t in out if isinstance(out, tuple | list) else [out]:
            if isinstance(t, torch.Tensor) and t.numel() > self.numel:
                self.numel, self.op = t.numel(), str(func)
        return out


def _smollm2_geometry(alibi: bool) -> LlamaForCausalLM:
    """One random layer shaped like SmolLM2-135M's (GQA 9/3, head_dim 64, MLP 1536); a 256-token vocabulary."""
    torch.manual_seed(0)
    extra = {"alibi_slopes": alibi_slopes(HEADS)} if alibi else {}
    cfg = LlamaConfig(
        vocab_size=256,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=1,
        num_attention_heads=HEADS,
        num_key_value_heads=3,
        head_dim=64,
        max_position_embeddings=SHORT,
        rope_parameters={"rope_type": "default", "rope_theta": 100_000.0},
        **extra,
    )
    model = LlamaForCausalLM(cfg).eval()
    model.set_attn_implementation(ATTENTION_NAME)
    return model


def _probe(model: LlamaForCausalLM, length: int) -> LargestOutput:
    ids = torch.randint(0, 256, (length,), generator=torch.Generator().manual_seed(length)).tolist()
    queries = list(range(length - 1 - ANSWER_STEPS, length - 1))
    with LargestOutput() as seen:
        fwd = forward_rows(model, ids, queries)
    assert fwd.rows.shape == (1, HEADS, ANSWER_STEPS, length)  # rows of the answer queries only
    return seen


@pytest.mark.parametrize("alibi", [False, True], ids=["rope-gqa", "alibi-gqa"])
def test_largest_tensor_grows_linearly_and_sdpa_stays_fused(alibi: bool) -> None:
    model = _smollm2_geometry(alibi)
    short, long = _probe(model, SHORT), _probe(model, LONG)
    assert FUSED_SDPA in long.ops, f"SDPA did not use the fused CPU kernel: {sorted(long.ops)}"
    ratio = long.numel / short.numel
    assert ratio <= LONG / SHORT * 1.05, f"largest tensor grew {ratio:.1f}x for {LONG // SHORT}x tokens ({long.op})"
    score_matrix = HEADS * LONG * LONG  # what the math SDPA kernel materialises per layer
    assert long.numel < score_matrix // 4, f"{long.op} returned {long.numel} elements at L={LONG}: quadratic"


def test_peak_rss_growth_is_far_below_one_score_matrix() -> None:
    model = _smollm2_geometry(alibi=False)
    ids = torch.randint(0, 256, (RSS_LENGTH,), generator=torch.Generator().manual_seed(1)).tolist()
    with PeakRSS() as peak:
        forward_rows(model, ids, list(range(RSS_LENGTH - 1 - ANSWER_STEPS, RSS_LENGTH - 1)))
    if not peak.exact:
        pytest.skip("/proc/self/clear_refs is not writable here: peak RSS is the process's lifetime peak")
    score_matrix_mb = HEADS * RSS_LENGTH**2 * 4 / 2**20  # what the math SDPA kernel would allocate for one layer
    growth = peak.megabytes - peak.start_megabytes
    assert growth < score_matrix_mb / 4, f"peak RSS grew {growth:.0f} MB in an {RSS_LENGTH}-token forward"


def test_flop_count_and_memory_fit_of_the_long_summary() -> None:
    from benchmarks.posprobe_long import memory_fits, model_flops

    smollm2 = {
        "hidden_size": 576,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "intermediate_size": 1536,
        "vocab_size": 49152,
    }
    f = model_flops(smollm2, 32768)
    assert f["matmul_params"] == 30 * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536) + 49152 * 576  # 134.5M
    assert f["attention"] == 2 * 30 * 32768**2 * 576  # QK^T and AV over the causal half
    rows = [{"length": n, "peak_rss_mb": 1000 + n / 64, "rss_start_mb": 1000.0} for n in (2048, 8192, 32768)]
    fit = memory_fits(rows, heads=9)
    assert fit["peak"]["linear"]["mb_per_1k_tokens"] == pytest.approx(16.0)
    assert fit["growth"]["max_abs_residual_mb"] < 1e-6
    assert abs(fit["peak"]["quadratic_term_mb_per_l2"]) < 1e-9 < fit["score_matrix_mb_per_l2"]
