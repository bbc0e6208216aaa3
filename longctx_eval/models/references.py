"""The in-repo position-encoding reference models (`tiny-rope`, `tiny-alibi`, `tiny-learned`) and reference.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from longctx_eval.errors import PrerequisiteError

REFERENCE_ROOT = Path(__file__).resolve().parents[2] / "reference_models"
REFERENCE_MODELS = ("tiny-rope", "tiny-alibi", "tiny-learned")


def reference_dir(name: str) -> Path:
    """The folder of a committed reference model; a clear error when the checkout lacks it."""
    folder = REFERENCE_ROOT / name
    if not (folder / "model.safetensors").is_file():
        raise PrerequisiteError(
            f"reference model {name!r} not found at {folder}; it ships with a source checkout "
            "(rebuild it with `make reference-models`)"
        )
    return folder


def reference_meta(folder: Path) -> dict[str, Any] | None:
    """reference.json of a model folder (training length, capabilities, head rule), or None for other models."""
    path = Path(folder) / "reference.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
