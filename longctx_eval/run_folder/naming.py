"""A run folder belongs to one model: its name, and the checks that refuse to mix two models in it."""

from __future__ import annotations

from pathlib import Path

from longctx_eval.errors import ConfigError
from longctx_eval.hashing import sha256_json
from longctx_eval.models.base import portable_identity
from longctx_eval.models.model_files import SETTING as FILES_SETTING
from longctx_eval.models.model_files import changed_files
from longctx_eval.models.model_spec import ModelSpec
from longctx_eval.models.spec import renamed, slug
from longctx_eval.results import ModelMeta
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


def check_same_identity(run_dir: Path, manifest: Manifest | None, meta: ModelMeta, spec: ModelSpec) -> str | None:
    """After loading: the weights, settings and model files must be those the folder's results were computed with.

    Returns a note to show when the folder predates hashing the model's own files (config, tokenizer, chat
    template): it is the same model otherwise, but its predictions were keyed without them and are made again."""
    held = None if manifest is None else manifest.model
    if held is None or held.identity_sha256 is None or meta.identity_sha256 is None:
        return None
    if held.identity_sha256 == meta.identity_sha256:
        return None
    files = meta.settings.get(FILES_SETTING)
    if files and FILES_SETTING not in held.runtime and held.identity_sha256 == legacy_identity_sha256(meta):
        return (  # its files were never recorded: whether they changed since cannot be told
            f"{run_dir} was run before the model's own files ({', '.join(sorted(files))}) entered its identity: "
            "they are hashed now, so its predictions are not reused and the tasks run now are generated again"
        )
    raise ConfigError(
        f"{run_dir} holds results of {held.spec!r} with {identity_change(held, meta)} "
        f"(identity {held.identity_sha256[:12]}, now {meta.identity_sha256[:12]}), so its predictions are not "
        f"reused; give this one its own name, e.g. {renamed(spec)!r}, or another --out"
    )


def identity_change(held: ModelMeta, meta: ModelMeta) -> str:
    """What differs between the model a folder holds and `meta`, in words: changed model files by name (from
    the files each run read, where both recorded them)."""
    recorded = FILES_SETTING in held.runtime and FILES_SETTING in meta.runtime
    files = changed_files(held.runtime, meta.runtime) if recorded else changed_files(held.settings, meta.settings)
    if not files:
        return "other weights or settings"
    weights = "" if held.sha256 == meta.sha256 else "other weights, and "
    return f"{weights}another {', '.join(files)} (edited or replaced since)"


def legacy_identity_sha256(meta: ModelMeta) -> str:
    """The identity `meta` had before model files entered identities (weights, tokenizer and settings only)."""
    settings = {k: v for k, v in meta.settings.items() if k != FILES_SETTING}
    return sha256_json(portable_identity(meta.model_copy(update={"settings": settings})))


def _canonical(spec: ModelSpec) -> str:
    return f"{spec.kind}:{spec.target}" if spec.target else spec.kind
