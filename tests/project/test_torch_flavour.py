"""The torch build `make eval` / `make test` put into a new .venv: with an NVIDIA driver on PATH (a fake
`nvidia-smi` printing the header the real one prints), the CUDA build of torch 2.13.0 the driver runs, from
PyTorch's wheel index; without one, the pin exactly as before. Read from `make -n` (nothing is installed) and
`make torch-flavour`; and the vLLM install line the docs give is the checkout's extra."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PIN = "torch==2.13.0"
QUIET = "install --quiet --disable-pip-version-check"
SMI_HEADER = """Tue Dec  9 10:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   33C    P0             69W /  700W |       1MiB /  81559MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+
"""
FAILED_SMI = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
FAILED_SMI += "NVIDIA driver is installed and running.\n"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def _fake_smi(folder: Path, text: str, status: int = 0) -> Path:
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'OUT'\n{text}OUT\nexit {status}\n")
    smi.chmod(0o755)
    return folder


TOOLS = ("sh", "sed", "awk", "head", "uname", "cat")
"""What the Makefile's shell calls run; a PATH of links to these alone hides any real nvidia-smi."""


def _path(tmp_path: Path, fake: Path | None) -> str:
    """A PATH holding the tools the Makefile calls and, first, the fake nvidia-smi's folder: never a real one."""
    tools = tmp_path / "tools"
    if not tools.exists():
        tools.mkdir()
        for name in TOOLS:
            found = shutil.which(name)
            assert found is not None, name
            (tools / name).symlink_to(found)
    return os.pathsep.join(([str(fake)] if fake else []) + [str(tools)])


def _make(tmp_path: Path, fake: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_FLAVOUR"} | {"PATH": _path(tmp_path, fake)}
    make = shutil.which("make")
    assert make is not None
    return subprocess.run(
        [make, "--no-print-directory", "-C", str(REPO), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _venv_recipe(tmp_path: Path, fake: Path | None, *args: str) -> tuple[str, str]:
    """(the torch pip command, the line saying which build and why) `make venv` would run for a new .venv."""
    venv = tmp_path / "venv"
    done = _make(tmp_path, fake, "-n", f"VENV={venv}", *args, "venv")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (pip,) = [ln for ln in lines if "pip install" in ln and "torch==" in ln]
    (why,) = [ln for ln in lines if ln.startswith('echo "torch 2.13.0, build')]
    assert pip.startswith(f"{venv}/bin/pip {QUIET} ")
    return pip.removeprefix(f"{venv}/bin/pip {QUIET} "), why


@pytest.mark.parametrize(
    ("driver", "cuda", "flavour"),
    [
        ("560.35.03", "12.6", "cu126"),
        ("570.86.15", "12.8", "cu128"),
        ("575.51.03", "12.9", "cu128"),
        ("580.65.06", "13.0", "cu130"),
        ("590.10.01", "13.1", "cu130"),
    ],
)
def test_an_nvidia_driver_gets_the_cuda_build_it_runs(tmp_path, driver, cuda, flavour):
    fake = _fake_smi(tmp_path / "bin", SMI_HEADER.format(driver=driver, cuda=cuda))
    pip, why = _venv_recipe(tmp_path, fake)
    assert pip == f"--index-url https://download.pytorch.org/whl/{flavour} {PIN}"
    assert f"nvidia-smi reports CUDA {cuda}: the newest of cu126 cu128 cu130 it runs" in why


def test_without_a_driver_the_pin_is_installed_as_before(tmp_path):
    pip, why = _venv_recipe(tmp_path, None)
    assert pip == PIN  # the line was `$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0`
    assert "no nvidia-smi on PATH" in why


def test_an_old_or_broken_driver_keeps_the_pin_and_says_why(tmp_path):
    old = _fake_smi(tmp_path / "old", SMI_HEADER.format(driver="550.54.15", cuda="12.4"))
    pip, why = _venv_recipe(tmp_path, old)
    assert pip == PIN and "nvidia-smi reports CUDA 12.4 - older than every one of cu126 cu128 cu130" in why
    broken = _fake_smi(tmp_path / "broken", FAILED_SMI, status=9)
    pip, why = _venv_recipe(tmp_path, broken)
    assert pip == PIN and "nvidia-smi printed no CUDA version - no working NVIDIA driver" in why


def test_torch_flavour_given_wins_and_a_bad_one_is_refused(tmp_path):
    fake = _fake_smi(tmp_path / "bin", SMI_HEADER.format(driver="570.86.15", cuda="12.8"))
    pip, why = _venv_recipe(tmp_path, fake, "TORCH_FLAVOUR=cu126")
    assert pip == f"--index-url https://download.pytorch.org/whl/cu126 {PIN}" and "TORCH_FLAVOUR=cu126 as given" in why
    assert _venv_recipe(tmp_path, fake, "TORCH_FLAVOUR=cpu")[0] == PIN
    printed = _make(tmp_path, fake, "-s", "torch-flavour")
    assert printed.returncode == 0 and printed.stdout.splitlines() == [
        "torch 2.13.0, build cu128 (nvidia-smi reports CUDA 12.8: the newest of cu126 cu128 cu130 it runs)",
        f".venv/bin/pip {QUIET} --index-url https://download.pytorch.org/whl/cu128 {PIN}",
    ]
    for bad in ("foo", "cu126 cu128", ""):
        refused = _make(tmp_path, fake, "-s", f"TORCH_FLAVOUR={bad}", "torch-flavour")
        assert refused.returncode == 2 and refused.stdout == ""
        assert f"TORCH_FLAVOUR='{bad}': expected cpu or one flavour of PyTorch's wheel index" in refused.stderr


def test_the_docs_install_vllm_from_the_checkout():
    """The suite is not on the package index: `pip install 'longctx-eval[vllm]'` finds nothing, so every install
    line installs the checkout's extra, and that extra exists."""
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    wrong = [
        f"{p.name}:{i}" for p in docs for i, ln in enumerate(p.read_text().splitlines(), 1) if "longctx-eval[" in ln
    ]
    assert wrong == []
    gpu = (REPO / "docs" / "gpu.md").read_text()
    assert re.search(r"^\.venv-vllm-gpu/bin/pip install -e '\.\[vllm\]'", gpu, re.M)
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["vllm"] == ["vllm==0.32.0"]
