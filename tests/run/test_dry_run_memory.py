"""`run --dry-run` memory and time before the run: weights at the chosen dtype and the KV cache of the longest
sequence and batch, from config.json alone, for config-only folders of a Llama-3.1-8B, a Llama-3.1-70B and Gemma 3
shapes (the published configs' values), against figures computed by hand here; where it would fit (CUDA devices or
RAM); and which throughput the time came from (assumed, a load JSON, this run folder's earlier run)."""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

import pytest

from longctx_eval.cli import main
from longctx_eval.errors import ConfigError
from longctx_eval.models.footprint import (
    AttentionShape,
    Batching,
    footprint,
    parameter_count,
    read_model_config,
)
from longctx_eval.models.spec import parse_spec
from longctx_eval.run.config import RunConfig, TaskPlan
from longctx_eval.run.cost import load_prices
from longctx_eval.run.dry_run import batching, choose_throughput, dry_run, render

LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
LLAMA_70B = LLAMA_8B | {
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
}
GEMMA3_1B = {  # google/gemma-3-1b-it: text only, a 512-token window, every 6th layer global
    "architectures": ["Gemma3ForCausalLM"],
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "max_position_embeddings": 32768,
    "model_type": "gemma3_text",
    "num_attention_heads": 4,
    "num_hidden_layers": 26,
    "num_key_value_heads": 1,
    "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06,
    "rope_local_base_freq": 10000,
    "rope_theta": 1000000,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16",
    "vocab_size": 262144,
}
GEMMA3_4B_TEXT = {  # the text model of google/gemma-3-4b-it (nested in text_config): a 1024-token window
    "model_type": "gemma3_text",
    "hidden_size": 2560,
    "intermediate_size": 10240,
    "num_hidden_layers": 34,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "sliding_window": 1024,
    "sliding_window_pattern": 6,
}

# Worked by hand. Llama-3.1-8B: embeddings 128256 x 4096 = 525,336,576, twice (untied output layer); per layer
# q and o 4096 x 4096 = 16,777,216 each, k and v 4096 x 1024 = 4,194,304 each, the MLP 3 x 4096 x 14336 =
# 176,160,768, two norms 8,192: 218,112,000 x 32 = 6,979,584,000; + 1,050,673,152 + the final norm 4,096.
PARAMS_8B = 8_030_261_248
# Llama-3.1-70B: embeddings 128256 x 8192 = 1,050,673,152, twice; per layer q, o 67,108,864 each, k, v 8,388,608
# each, MLP 3 x 8192 x 28672 = 704,643,072, norms 16,384: 855,654,400 x 80 = 68,452,352,000; + 2,101,346,304 + 8,192.
PARAMS_70B = 70_553_706_496
# Gemma-3-1B: embeddings 262144 x 1152 = 301,989,888 (tied); per layer q 1152 x 1024 and o 1024 x 1152 =
# 1,179,648 each, k and v 1152 x 256 = 294,912 each, MLP 3 x 1152 x 6912 = 23,887,872, four norms 4 x 1152 and
# q/k norms 2 x 256: 26,842,112 x 26 = 697,894,912; + 301,989,888 + the final norm 1,152.
PARAMS_GEMMA3_1B = 999_885_952
KV_TOKEN_8B_BF16 = 2 * 32 * 8 * 128 * 2  # 131,072 bytes
KV_TOKEN_70B_BF16 = 2 * 80 * 8 * 128 * 2  # 327,680 bytes: 40 GiB at 128K
KV_LAYER_TOKEN_GEMMA3_1B = 2 * 1 * 256 * 2  # 1,024 bytes per layer and token
H100 = ("NVIDIA H100 80GB HBM3", 81559 * 2**20)  # what torch reports for one: 81,559 MiB
ONE = Batching("one sequence")


def _folder(root: Path, name: str, config: dict, tokenizer_from: Path) -> Path:
    """A config-only model folder: config.json and a tokenizer, no weights."""
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    for f in tokenizer_from.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, folder / f.name)
    return folder


@pytest.fixture
def configs(tmp_path, tiny_llama_dir):
    return {
        name: _folder(tmp_path, name, cfg, tiny_llama_dir)
        for name, cfg in (("llama-8b", LLAMA_8B), ("llama-70b", LLAMA_70B), ("gemma3-1b", GEMMA3_1B))
    }


def test_llama_and_gemma_configs_against_hand_computed_figures(configs, tmp_path):
    for name, params, shape in (
        ("llama-8b", PARAMS_8B, AttentionShape(32, 8, 128)),
        ("llama-70b", PARAMS_70B, AttentionShape(80, 8, 128)),
        ("gemma3-1b", PARAMS_GEMMA3_1B, AttentionShape(26, 1, 256, sliding_layers=22, sliding_window=512)),
    ):
        cfg = read_model_config(configs[name])
        assert cfg.attention == shape and cfg.config_dtype == "bfloat16"
        count = parameter_count(configs[name], cfg)
        assert count.params == params and "no weights" in count.source
    fp = footprint(parse_spec(f"hf:{configs['llama-8b']}?dtype=auto"), gpus=[])
    assert fp is not None and fp.dtype == "bfloat16" and fp.weights_bytes == 16_060_522_496  # 16.06 GB
    assert fp.attention.kv_bytes(1, 2) == KV_TOKEN_8B_BF16
    assert fp.attention.kv_bytes(131072, 2) == 17_179_869_184  # 128K tokens: 16 GiB
    fp70 = footprint(parse_spec(f"hf:{configs['llama-70b']}"), gpus=[])  # float32, the default
    assert fp70 is not None and fp70.dtype == "float32" and fp70.weights_bytes == 282_214_825_984  # 282 GB
    assert "?dtype=auto would load config.json's bfloat16" in fp70.dtype_source
    assert fp70.attention.kv_bytes(131072, 2) == KV_TOKEN_70B_BF16 * 131072 == 40 * 2**30
    gemma = read_model_config(configs["gemma3-1b"]).attention
    # 4 global layers hold every token, 22 sliding ones 512: at 32K, (4 x 32768 + 22 x 512) x 1,024 bytes
    assert gemma.kv_bytes(32768, 2) == (4 * 32768 + 22 * 512) * KV_LAYER_TOKEN_GEMMA3_1B == 145_752_064
    assert gemma.kv_bytes(300, 2) == 26 * 300 * KV_LAYER_TOKEN_GEMMA3_1B  # under the window every layer holds all
    assert gemma.kv_bytes(32768, 2, batch=3) == 3 * 145_752_064


def test_gemma3_nested_text_config_and_layer_types(tmp_path):
    """Gemma 3 4B-27B nest the text model in text_config (the vision tower beside it); its layer pattern, or an
    explicit layer_types, says which layers slide; read by transformers, and from the raw file where transformers
    does not know the architecture."""
    for model_type in ("gemma3", "not-known-to-transformers"):
        folder = tmp_path / model_type
        folder.mkdir()
        config = {"model_type": model_type, "text_config": GEMMA3_4B_TEXT, "torch_dtype": "bfloat16"}
        (folder / "config.json").write_text(json.dumps(config))
        cfg = read_model_config(folder)
        assert cfg.attention == AttentionShape(34, 4, 256, sliding_layers=29, sliding_window=1024)  # 5 global
        # 128K: (5 x 131072 + 29 x 1024) x 2 x 4 x 256 x 2 bytes
        assert cfg.attention.kv_bytes(131072, 2) == (5 * 131072 + 29 * 1024) * 4096 == 2_805_989_376
    folder = tmp_path / "types"
    folder.mkdir()
    types = ["sliding_attention", "full_attention"] * 17
    text = {k: v for k, v in GEMMA3_4B_TEXT.items() if k != "sliding_window_pattern"} | {"layer_types": types}
    (folder / "config.json").write_text(json.dumps({"model_type": "x", "text_config": text}))
    assert read_model_config(folder).attention.sliding_layers == 17


def test_parameters_from_safetensors_headers_and_the_decoder_formula(tiny_llama_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    cfg = read_model_config(tiny_llama_dir)
    count = parameter_count(tiny_llama_dir, cfg)
    loaded = AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir), dtype=torch.float32)
    assert count.params == sum(p.numel() for p in loaded.parameters()) and "safetensors headers" in count.source
    assert count.stored_bytes == 4 * count.params  # stored in float32
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps(LLAMA_8B | {"model_type": "my-llama"}))
    formula = parameter_count(unknown, read_model_config(unknown))
    assert formula.params == PARAMS_8B and "decoder formula" in formula.source
    bad = tmp_path / "bad"
    shutil.copytree(unknown, bad)
    (bad / "model.safetensors").write_bytes(struct.pack("<Q", 2**40) + b"{}")
    with pytest.raises(ConfigError, match=r"model.safetensors: not a safetensors file \(header length"):
        parameter_count(bad, read_model_config(bad))


def _memory_rows(text: str, model: str) -> list[list[str]]:
    start = text.index("memory and time per model and length")
    rows = [ln.split() for ln in text[start:].splitlines() if ln.startswith(model + " ")]
    return [r for r in rows if re.fullmatch(r"[0-9,]+", r[1])]


NEEDLE = ["--tasks", "needle", "--limit", "1", "--task-arg", "needle.source=synthetic"]


def test_dry_run_prints_memory_per_model_and_length_for_config_only_folders(configs, tmp_path, capsys):
    models = ",".join(
        [
            f"hf:{configs['llama-8b']}?dtype=auto&name=llama-8b",
            f"hf:{configs['llama-70b']}?dtype=bfloat16&name=llama-70b",
            f"hf:{configs['gemma3-1b']}?dtype=auto&name=gemma3-1b",
            "bm25",
        ]
    )
    out = tmp_path / "out"
    assert main(["run", "--dry-run", "--model", models, *NEEDLE, "--lengths", "1k,2k", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert not out.exists()
    per_token = {"llama-8b": KV_TOKEN_8B_BF16, "llama-70b": KV_TOKEN_70B_BF16}
    weights = {"llama-8b": "16.06", "llama-70b": "141.11", "gemma3-1b": "2.00"}
    for model in ("llama-8b", "llama-70b", "gemma3-1b"):
        rows = _memory_rows(text, model)
        assert [r[1] for r in rows] == ["1,024", "2,048"]
        for row in rows:
            _, _, requests, longest, batch, dtype, w, _, kv, _, total, _, fits, *_ = row
            tokens = int(longest.replace(",", ""))
            assert 900 < tokens <= int(row[1].replace(",", "")) and (requests, batch, dtype) == ("1", "1", "bfloat16")
            if model == "gemma3-1b":  # 4 global layers hold every token, 22 sliding ones at most 512
                expected = (4 * tokens + 22 * 512) * KV_LAYER_TOKEN_GEMMA3_1B
            else:
                expected = per_token[model] * tokens
            assert w == weights[model] and kv == f"{expected / 1e9:,.2f}"
            assert total == f"{(float(w) * 1e9 + expected) / 1e9:,.2f}"
            assert fits == ("no" if model == "llama-70b" else "yes")  # against this machine's RAM (24 GiB here)
    assert "KV cache: 327,680 bytes per token = 2 x 80 layers x 8 KV heads x 128 x 2 bytes (bfloat16)" in text
    assert "of which 22 sliding-window layers hold at most 512 tokens (4 full-attention layers hold all)" in text
    assert "8,030,261,248 parameters x 2 bytes (bfloat16); parameters from config.json's shapes" in text
    assert "fits: weights + KV cache against this machine's RAM" in text and "torch sees no CUDA device" in text
    assert text.count("a config-only folder: prompts counted with its tokenizer") == 3
    assert "time of llama-8b: assumed 2000 prompt + 50 output tokens/s, the default" in text
    assert "memory of bm25: not estimated (only hf: and vllm: models are)." in text and not _memory_rows(text, "bm25")


def test_fits_against_the_cuda_devices_torch_sees(configs, tmp_path, tiny_llama_dir):
    """With one H100 (as torch reports it): the 8B fits, the 70B in bfloat16 does not, nor on cuda:0 of two; over
    both under device_map it does; batch=auto on CUDA packs up to the automatic budget's 131,072 tokens."""
    specs = [
        parse_spec(f"hf:{configs['llama-8b']}?dtype=auto&name=l8"),
        parse_spec(f"hf:{configs['llama-70b']}?dtype=bfloat16&name=l70"),
    ]
    for gpus, fits in (([H100], {"l8": "yes", "l70": "no"}), ([H100, H100], {"l8": "yes", "l70": "no"})):
        for spec in specs:
            fp = footprint(spec, gpus=gpus)
            assert fp is not None and fp.placement.cuda
            assert fp.fits(fp.row(1024, 1, 1024, ONE)) == fits[spec.name]
    mapped = footprint(parse_spec(f"hf:{configs['llama-70b']}?dtype=bfloat16&device_map=auto"), gpus=[H100, H100])
    assert mapped is not None and mapped.fits(mapped.row(1024, 1, 1024, ONE)) == "yes"
    assert mapped.placement.label == "2 x NVIDIA H100 80GB HBM3, 171.04 GB = 159.3 GiB (device_map)"
    one = footprint(specs[0], gpus=[H100])
    assert one is not None and one.placement.label == "cuda:0 NVIDIA H100 80GB HBM3, 85.52 GB = 79.6 GiB"
    auto = batching(specs[0], one)
    packed = one.row(4096, 64, 4096, auto)  # 131,072 // 4,096 = 32 sequences of 4K
    assert packed.batch == 32 and packed.kv_bytes == 32 * 4096 * KV_TOKEN_8B_BF16
    assert one.row(131072, 64, 131072, auto).batch == 1
    assert one.row(1024, 3, 1000, auto).batch == 3  # never more than it sends
    fixed_spec = parse_spec(f"hf:{configs['llama-8b']}?dtype=auto&batch_size=4")
    fixed = footprint(fixed_spec, gpus=[H100])
    assert fixed is not None and fixed.row(1024, 10, 1024, batching(fixed_spec, fixed)).batch == 4
    on_cpu = footprint(specs[0], gpus=[])
    assert on_cpu is not None and on_cpu.row(1024, 10, 1024, batching(specs[0], on_cpu)).batch == 1
    config = RunConfig(seed=0, out=tmp_path / "out")
    plans = [(specs[0], [TaskPlan(_needle(), [1024], 1, args={"source": "synthetic"})])]
    result = dry_run(plans, config, load_prices(None), choose_throughput(config, None, None), gpus=[H100])
    text = render(result, load_prices(None), [specs[0]])
    assert "fits: weights + KV cache against cuda:0 NVIDIA H100 80GB HBM3, 85.52 GB = 79.6 GiB" in text
    assert "batch_size=auto on CUDA: packed, at most 64 sequences and 131,072 tokens" in text


def _needle():
    from longctx_eval.discovery import discover

    return discover(())["needle"]


def test_time_comes_from_this_run_folder_a_load_json_or_the_assumption(tiny_llama_dir, tmp_path, capsys):
    """A real run of a small model records prefill and decode seconds per task; its next dry run estimates time
    from those rates and says so; a load JSON or a stated assumption say theirs."""
    out = tmp_path / "out"
    spec = f"hf:{tiny_llama_dir}?name=tiny"
    common = ["--model", spec, *NEEDLE, "--lengths", "384", "--out", str(out)]
    assert main(["run", "--dry-run", *common]) == 0
    assert "time of tiny: assumed 2000 prompt + 50 output tokens/s, the default" in capsys.readouterr().out
    assert main(["run", *common]) == 0
    capsys.readouterr()
    (task,) = json.loads((out / "tiny" / "run.json").read_text())["tasks"]
    t = task["throughput"]
    prefill = t["prompt_tokens_per_s"] * t["seconds"] / t["prefill_seconds"]
    decode = t["output_tokens_per_s"] * t["seconds"] / t["decode_seconds"]
    assert main(["run", "--dry-run", *common, "--lengths", "384,512"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.startswith("time of tiny: "))
    assert f"this run folder: {prefill:,.0f} prefill + {decode:,.1f} decode tokens/s" in line
    assert "measured by its earlier run of needle at 384-384 tokens" in line
    (row,) = [ln.split() for ln in text.splitlines() if ln.startswith("tiny ") and " needle " in ln]
    prompt, output = int(row[5].replace(",", "")), int(row[7].replace(",", ""))
    seconds = prompt / prefill + output / decode
    assert seconds < 60 and row[9] == f"{seconds:.1f}"  # the task row's time at those rates
    assert "a config-only folder" not in text  # a folder with weights loads as the run loads it
    assert "parameters from the safetensors headers (model.safetensors; no tensor read)" in text

    load = tmp_path / "load.json"
    load.write_text(json.dumps({"kind": "load_test", "levels": [{"concurrency": 4, "total_tokens_per_s": 800.0}]}))
    assert main(["run", "--dry-run", *common, "--throughput-from", str(load)]) == 0
    assert "time of tiny: load JSON: measured 800 tokens/s at concurrency 4" in capsys.readouterr().out
    assert main(["run", "--dry-run", *common, "--assume-throughput", "100,10"]) == 0
    assert "time of tiny: assumed 100 prompt + 10 output tokens/s (--assume-throughput)" in capsys.readouterr().out
    assert main(["run", "--dry-run", *common, "--throughput-from", str(out / "tiny")]) == 0
    assert f"time of tiny: --throughput-from run.json: {prefill:,.0f} prefill" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_key_value_heads": "eight"}, r"config.json: num_key_value_heads = 'eight'; expected a positive integer"),
        ({"num_hidden_layers": 0}, r"config.json: num_hidden_layers = 0; expected a positive integer"),
        ({"layer_types": ["full_attention"] * 3, "sliding_window": 512}, r"config.json: layer_types = .*expected 32"),
        ({"torch_dtype": "float7"}, r"config.json: torch_dtype = 'float7'; expected one of float32"),
    ],
)
def test_a_malformed_config_is_one_line_naming_file_and_field(configs, tmp_path, capsys, change, message):
    folder = configs["llama-8b"]
    (folder / "config.json").write_text(json.dumps(LLAMA_8B | change))
    args = ["run", "--dry-run", "--model", f"hf:{folder}?dtype=auto", *NEEDLE, "--lengths", "1k"]
    assert main([*args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert re.search(message, line) and str(folder / "config.json") in line


def test_a_config_that_is_not_json_is_named(configs, tmp_path, capsys):
    folder = configs["gemma3-1b"]
    (folder / "config.json").write_text('{"num_hidden_layers": 26,')
    args = ["run", "--dry-run", "--model", f"hf:{folder}", *NEEDLE, "--lengths", "1k", "--out", str(tmp_path / "o")]
    assert main(args) == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert f"{folder / 'config.json'}: not valid JSON" in line


def test_vllm_fits_against_its_parallel_gpus_and_memory_share(configs):
    """`vllm:` spreads the weights over tensor x pipeline parallel GPUs and takes gpu_memory_utilization of them
    (built as a spec record: vLLM is not installed in this venv, and the estimate needs none of it)."""
    from longctx_eval.models.model_spec import ModelSpec
    from longctx_eval.models.options import VLLMOptions

    def spec(**options: object) -> ModelSpec:
        opts = VLLMOptions.model_validate({"dtype": "bfloat16", **options})
        return ModelSpec("vllm:x", "vllm", str(configs["llama-70b"]), opts, "l70")

    two = footprint(spec(tensor_parallel_size=2), gpus=[H100, H100])
    assert two is not None and two.fits(two.row(1024, 5, 1024, ONE)) == "yes"
    assert two.row(1024, 5, 1024, batching(spec(), two)).batch == 1
    assert (
        two.placement.bytes == 2 * H100[1] and "vLLM reserves its gpu_memory_utilization share" in two.placement.label
    )
    half = footprint(spec(tensor_parallel_size=2, gpu_memory_utilization=0.5), gpus=[H100, H100])
    assert half is not None and half.placement.bytes == H100[1] and half.fits(half.row(1024, 1, 1024, ONE)) == "no"
    short = footprint(spec(tensor_parallel_size=4), gpus=[H100, H100])
    assert short is not None and short.fits(short.row(1024, 1, 1024, ONE)) == "no"
    assert short.placement.shortfall == "tensor x pipeline parallel = 4 GPUs, torch sees 2"
