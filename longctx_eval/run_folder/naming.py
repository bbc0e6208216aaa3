"""A run folder belongs to one model: its name, and the checks that refuse to mix two models in it."""

from __future__ import annotations

from pathlib import Path

from longctx_eval.errors import ConfigError
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.spec import renamed, slug
from longctx_eval.run_folder.manifest import Manifest
from longctx_eval.run_folder.shard import Shard


def run_dir_for(out: Path, spec: ModelSpec, shard: Shard | None = None) -> Path:
    """The one place a model's run folder is named: OUT/<slug of the model name>, always a folder inside OUT;
    a shard's is OUT/<slug>.shard-I-of-N (`longctx-eval merge` joins them)."""
    name = slug(spec.name)
    if name in (".", "..") or "/" in name or name.startswith("."):
        raise ConfigError(f"model name {spec.name!r} cannot name a run folder inside {out}; give it ?name=...")
    return Path(out) / (name + (shard.folder_suffix if shard is not None else ""))


def _target(spec_text: str) -> str:
    """kind:target of a spec string, without options (what names the weights)."""
    return spec_text.split("?", 1)[0]


def check_same_model(run_dir: Path, manifest: Manifest | None, spec: ModelSpec) -> None:
    """Before loading: the folder's results must come from the same kind and target as `spec`."""
    if manifest is None:
        return
    held = manifest.model
    if held.kind == spec.kind and _target(held.spec) in (_target(spec.raw), _canonical(spec)):
        return
    if held.kind == spec.kind and spec.raw.split("?", 1)[0] == held.name:
        return  # a short name (smollm2-135m) and its expansion name the same model
    raise ConfigError(
        f"{run_dir} holds results of {held.spec!r}; {spec.raw!r} is another model. "
        f"Give it its own name with ?name=..., e.g. {renamed(spec)!r}, or another --out"
    )


def check_same_identity(run_dir: Path, manifest: Manifest | None, identity_sha256: str | None, spec: ModelSpec) -> None:
    """After loading: the weights and settings must be those the folder's results were computed with."""
    if manifest is None or manifest.model.identity_sha256 is None or identity_sha256 is None:
        return
    if manifest.model.identity_sha256 != identity_sha256:
        raise ConfigError(
            f"{run_dir} holds results of {manifest.model.spec!r} with other weights or settings "
            f"(identity {manifest.model.identity_sha256[:12]}, now {identity_sha256[:12]}); "
            f"give this one its own name, e.g. {renamed(spec)!r}, or another --out"
        )


def _canonical(spec: ModelSpec) -> str:
    return f"{spec.kind}:{spec.target}" if spec.target else spec.kind
