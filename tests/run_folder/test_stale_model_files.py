"""Editing a model folder's config.json or chat template never resumes the predictions made before the edit.

Before model files entered the identity, a SmolLM2 folder whose config was switched to linear RoPE x4 and rerun
into the same --out resumed the old predictions (needle, 3 samples at 1K: 0.67 reported, 0.00 true), exit 0.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.errors import ConfigError
from longctx_eval.hashing import sha256_json
from longctx_eval.models.base import portable_identity
from longctx_eval.models.model_files import SETTING
from longctx_eval.models.spec import parse_spec
from longctx_eval.results import ModelMeta
from longctx_eval.run_folder.manifest import Manifest, read_manifest
from longctx_eval.run_folder.naming import check_same_identity, legacy_identity_sha256


@pytest.fixture
def smollm2_copy(tmp_path) -> Path:
    """The converted SmolLM2 folder copied (weights linked, small files copied, its conversion marker kept)."""
    from longctx_eval.models.assets import smollm2_dir

    source, folder = smollm2_dir(), tmp_path / "smollm2"
    folder.mkdir()
    for f in source.iterdir():
        if f.suffix == ".safetensors":
            os.symlink(f, folder / f.name)
        else:
            (folder / f.name).write_bytes(f.read_bytes())
    return folder


def _run(out: Path, model: str) -> int:
    return main(["run", "--model", model, *tiny_needle("384"), "--limit", "1", "--out", str(out)])


def _predictions(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


def test_an_edited_config_or_chat_template_is_another_model(tmp_path, smollm2_copy, capsys):
    out, model = tmp_path / "r", f"hf:{smollm2_copy}"
    assert _run(out, model) == 0
    run_dir = out / "smollm2"
    first = _predictions(run_dir)
    held = read_manifest(run_dir).model
    assert SETTING not in held.settings  # the files its conversion wrote: the GGUF's hash names them
    capsys.readouterr()

    original = (smollm2_copy / "config.json").read_text()
    config = json.loads(original)
    config["rope_parameters"] = {"rope_type": "linear", "factor": 4.0, "rope_theta": 100000.0}
    (smollm2_copy / "config.json").write_text(json.dumps(config, indent=2))
    assert _run(out, model) == 2  # the same command: refused, as other weights are, never resumed
    err = capsys.readouterr().err
    assert "another config.json" in err and "predictions are not reused" in err and "?name=" in err
    assert _predictions(run_dir) == first  # nothing was appended to the folder

    assert _run(out, f"{model}?name=linear4") == 0  # under its own name it is computed, not read back
    assert "already done" not in capsys.readouterr().out
    linear = _predictions(out / "linear4")
    assert linear[0]["key"] != first[0]["key"] and linear[0]["text"] != first[0]["text"]

    (smollm2_copy / "config.json").write_text(original)
    tokenizer_config = json.loads((smollm2_copy / "tokenizer_config.json").read_text())
    tokenizer_config["chat_template"] = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    (smollm2_copy / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    assert _run(out, model) == 2
    assert "another tokenizer_config.json" in capsys.readouterr().err


def _meta(files: dict[str, str] | None = None, identity: bool = True) -> ModelMeta:
    """A model's record: `files` read (runtime) and, with `identity`, entering its identity (settings)."""
    settings = {"decoding": "greedy", **({SETTING: files} if files and identity else {})}
    runtime = {} if files is None else {SETTING: files}
    meta = ModelMeta(
        spec="hf:/m", name="m", kind="hf", sha256="a" * 64, tokenizer="t", capabilities=[], settings=settings
    )
    return meta.model_copy(update={"identity_sha256": sha256_json(portable_identity(meta)), "runtime": runtime})


def test_a_folder_from_before_file_hashing_is_the_same_model_with_its_predictions_redone(tmp_path):
    spec = parse_spec(f"hf:{tmp_path}")
    before, now = _meta(), _meta({"config.json": "c" * 64})
    assert legacy_identity_sha256(now) == before.identity_sha256 != now.identity_sha256
    note = check_same_identity(tmp_path, Manifest.model_construct(model=before), now, spec)
    assert note is not None and "config.json" in note and "not reused" in note
    assert check_same_identity(tmp_path, Manifest.model_construct(model=now), now, spec) is None

    edited = _meta({"config.json": "d" * 64})
    with pytest.raises(ConfigError, match=r"another config\.json \(edited"):
        check_same_identity(tmp_path, Manifest.model_construct(model=now), edited, spec)
    # files a conversion vouches for enter no identity; once one is edited it does, and the refusal names it
    vouched = _meta({"config.json": "c" * 64, "tokenizer.json": "e" * 64}, identity=False)
    assert vouched.identity_sha256 == before.identity_sha256
    edited = _meta({"config.json": "d" * 64, "tokenizer.json": "e" * 64})
    with pytest.raises(ConfigError, match=r"another config\.json \(edited"):
        check_same_identity(tmp_path, Manifest.model_construct(model=vouched), edited, spec)
