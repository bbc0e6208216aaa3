"""`longctx-eval merge SHARD...`: the N run folders of `run --shard I/N` joined into the one folder an unsharded
run writes: every task's samples in their unsharded order (byte for byte the same file), every prediction, and a
manifest whose task entries hash as the unsharded run's, so scoring it gives the same numbers.

Shards are refused with one line where they cannot make one run: another suite version (or commit), model
identity, seed, task version, lengths, limit or arguments; a shard missing, given twice, or of another N; a task
not generated in every shard; a torn prediction line; positions that do not cover the run exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from longctx_eval.atomic_io import atomic_write_bytes, atomic_write_text, ensure_dir
from longctx_eval.errors import ConfigError, RunFileError
from longctx_eval.hashing import sha256_json, sha256_text
from longctx_eval.run_folder.manifest import Manifest, TaskEntry, now_iso, read_manifest, write_manifest
from longctx_eval.run_folder.paths import inside
from longctx_eval.run_folder.predictions import PredictionStore
from longctx_eval.sample import recorded_sample_hash


@dataclass(frozen=True)
class ShardFolder:
    """One shard's run folder and its manifest."""

    path: Path
    manifest: Manifest


def read_shards(folders: Sequence[Path]) -> list[ShardFolder]:
    """Each folder's manifest, every task of it a shard; refused with one line otherwise."""
    if not folders:
        raise ConfigError("merge: expected the run folders of every shard, e.g. out/bm25.shard-*")
    out = []
    for folder in folders:
        manifest = read_manifest(folder) if folder.is_dir() else None
        if manifest is None:
            raise ConfigError(f"{folder}: not a run folder (expected one written by `run --shard I/N`)")
        plain = [name for name, entry in manifest.tasks.items() if entry.shard is None]
        if plain or not manifest.tasks:
            raise ConfigError(
                f"{folder}: task {plain[0]!r} was not run as a shard" if plain else f"{folder}: holds no task"
            )
        out.append(ShardFolder(folder, manifest))
    return out


def check_shards(shards: Sequence[ShardFolder]) -> None:
    """Refuse shards that cannot form one run (see the module doc), naming the folder and what differs."""
    first = shards[0]
    for other in shards[1:]:
        a, b = first.manifest, other.manifest
        if (a.model.identity_sha256, a.identity) != (b.model.identity_sha256, b.identity):
            raise ConfigError(
                f"{other.path}: another model identity than {first.path} ({b.model.spec!r} vs {a.model.spec!r}); "
                "expected the shards of one model"
            )
        if a.suite != b.suite:
            raise ConfigError(
                f"{other.path}: run by longctx-eval {b.suite.version} ({b.suite.git or 'no git'}), {first.path} by "
                f"{a.suite.version} ({a.suite.git or 'no git'}); expected the shards of one run, by one version"
            )
        if set(a.tasks) != set(b.tasks):
            missing = sorted(set(a.tasks) ^ set(b.tasks))[0]
            raise ConfigError(f"{other.path} and {first.path} differ in task {missing!r}; expected the same tasks")
        for name, entry in a.tasks.items():
            theirs = b.tasks[name]
            if theirs.config() != entry.config():
                field = next(k for k, v in entry.config().items() if theirs.config().get(k) != v)
                raise ConfigError(
                    f"{other.path}: task {name!r} ran with another {field} ({theirs.config().get(field)!r}, "
                    f"{first.path} {entry.config()[field]!r}); expected one run's shards"
                )
    for name in first.manifest.tasks:
        entries = [(s, s.manifest.tasks[name]) for s in shards]
        counts = {e.shard.count for _, e in entries if e.shard is not None}
        if len(counts) != 1:
            raise ConfigError(f"task {name!r}: shards of different N ({sorted(counts)}); expected I/N of one N")
        (count,) = counts
        seen = sorted(e.shard.index for _, e in entries if e.shard is not None)
        if seen != list(range(1, count + 1)):
            twice = sorted({i for i in seen if seen.count(i) > 1})
            gone = sorted(set(range(1, count + 1)) - set(seen))
            detail = f"shard {twice[0]}/{count} given twice" if twice else f"shard {gone[0]}/{count} missing"
            raise ConfigError(f"task {name!r}: {detail}; expected each of the {count} shards once")
        for shard, entry in entries:
            if entry.status != "generated":
                raise ConfigError(
                    f"{shard.path}: task {name!r} is {entry.status} (its run did not finish); run that shard "
                    "again (it resumes), then merge"
                )


def merge_shards(folders: Sequence[Path], out: Path) -> Path:
    """Write the merged run folder `out` (a new or empty folder) from the shard folders; returns it."""
    shards = read_shards(folders)
    check_shards(shards)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} already exists and is not empty; remove it or give another --out")
    first = shards[0].manifest
    tasks: dict[str, TaskEntry] = {}
    merged_samples: dict[str, str] = {}
    for name, entry in first.tasks.items():
        text, dataset_hash = _merged_samples(shards, name)
        merged_samples[name] = text
        entries = [s.manifest.tasks[name] for s in shards]
        tasks[name] = entry.model_copy(
            update={
                "n_samples": sum(len(e.shard.positions) for e in entries if e.shard is not None),
                "dataset_hash": dataset_hash,
                "samples_sha256": sha256_text(text),
                "seconds": round(sum(e.seconds for e in entries), 3),  # the shards' generation time, added up
                "warnings": list(dict.fromkeys(w for e in entries for w in e.warnings)),
                "started": min(e.started for e in entries),
                "shard": None,
            }
        )
    predictions = _merged_predictions(shards)
    ensure_dir(out)
    for name, text in merged_samples.items():
        atomic_write_text(inside(out, "samples", f"{name}.jsonl"), text)
    atomic_write_bytes(inside(out, "predictions.jsonl"), predictions)
    skipped = {k: v for s in shards for k, v in s.manifest.skipped.items()}
    manifest = first.model_copy(
        update={
            "tasks": tasks,
            "skipped": skipped,
            "started": min(s.manifest.started for s in shards),
            "merged_from": [str(s.path) for s in shards],
            "merged": now_iso(),
        }
    )
    write_manifest(out, manifest)
    return out


def _merged_samples(shards: Sequence[ShardFolder], name: str) -> tuple[str, str]:
    """The task's samples file in the unsharded order (each shard's lines at its positions) and its dataset hash."""
    placed: dict[int, str] = {}
    total = None
    for shard in shards:
        entry = shard.manifest.tasks[name]
        assert entry.shard is not None
        total = entry.shard.total
        path = inside(shard.path, "samples", f"{name}.jsonl")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RunFileError(f"{path}: cannot be read: {exc}") from None
        if entry.samples_sha256 is not None and sha256_text(text) != entry.samples_sha256:
            raise RunFileError(f"{path}: not the samples its manifest records (rewritten since?); run the shard again")
        lines = text.splitlines()
        if len(lines) != len(entry.shard.positions):
            raise RunFileError(
                f"{path}: {len(lines)} samples, its manifest places {len(entry.shard.positions)}; run the shard again"
            )
        for position, line in zip(entry.shard.positions, lines, strict=True):
            if position in placed:
                raise ConfigError(f"task {name!r}: sample position {position} is in two shards; expected one run's")
            placed[position] = line
    if total is None or sorted(placed) != list(range(total)):
        raise ConfigError(
            f"task {name!r}: the shards hold {len(placed)} of {total} samples; expected every shard of one run"
        )
    ordered = [placed[i] for i in range(total)]
    rows = [json.loads(line) for line in ordered]
    hashes = [recorded_sample_hash(r["id"], r["context_sha256"], r["question"], r["gold"], r["metadata"]) for r in rows]
    return "\n".join(ordered) + ("\n" if ordered else ""), sha256_json(hashes)


def _merged_predictions(shards: Sequence[ShardFolder]) -> bytes:
    """Every shard's prediction lines (as written, their checks kept); a torn line is refused, never dropped."""
    out: dict[str, bytes] = {}
    for shard in shards:
        store = PredictionStore(inside(shard.path, "predictions.jsonl"), repair=False)
        if store.torn_lines:
            raise RunFileError(
                f"{store.path}:{store.torn_lines[0]}: an unusable prediction line; run that shard again (it "
                "quarantines the line and redoes the sample), then merge"
            )
        for key, rec in store.records.items():
            out[key] = json.dumps(rec, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
    return b"".join(out.values())
