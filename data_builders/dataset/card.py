"""The dataset card (README.md): YAML configs and features for `datasets`, provenance and hashes for people."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow
import yaml
from datasets import Features

from data_builders.dataset.registry import BuildConfig, BuilderInfo
from data_builders.haystack.assembly import HaystackSource
from longctx_eval.hashing import sha256_json
from longctx_eval.provenance import __version__
from longctx_eval.text.tokenizer import Tokenizer

CARD_MARKER = "<!-- longctx-eval dataset card -->"
SPLIT = "test"
EMBEDDED_TOKENIZER_HUB_IDS = {
    "smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "minilm": "sentence-transformers/all-MiniLM-L6-v2",
}
"""The Hub repos whose tokenizers the short names of `load_tokenizer` embed (same vocabulary and merges)."""


def tokenizer_hub_id(name: str) -> str | None:
    """The Hub repo of a tokenizer name: embedded short names mapped, a hub id as given, else None (a file)."""
    if name in EMBEDDED_TOKENIZER_HUB_IDS:
        return EMBEDDED_TOKENIZER_HUB_IDS[name]
    if name.startswith("tiktoken:") or name.endswith(".json") or name.startswith(("/", ".", "~")):
        return None
    parts = name.split("/")
    return name if len(parts) == 2 and all(parts) and not Path(name).exists() else None


def _tokenizer_line(tokenizer: Tokenizer) -> str:
    hub = tokenizer_hub_id(tokenizer.name)
    if hub:
        return f'the tokenizer of the Hub repo `{hub}` (`AutoTokenizer.from_pretrained("{hub}")`)'
    if tokenizer.name.startswith("tiktoken:"):
        return f"the tiktoken encoding `{tokenizer.name.removeprefix('tiktoken:')}`"
    return f"the local tokenizer file `{tokenizer.name}` (not on the Hub; match it by the sha256 below)"


@dataclass(frozen=True)
class ConfigEntry:
    """One `configs:` entry: its name, parquet files (relative paths), row count and features."""

    name: str
    paths: list[str]
    num_examples: int
    num_bytes: int  # Arrow size in memory, as `datasets` records it
    features: Features


def dataset_sha256(files: Mapping[str, str]) -> str:
    """One hash over every data file's path and sha256: what a run file records as `dataset_hash`."""
    return sha256_json(dict(files))


def build_command(info: BuilderInfo, config: BuildConfig, tokenizer: Tokenizer) -> str:
    """The CLI command that rebuilds this dataset byte for byte (the output folder left as <DIR>)."""
    lengths = ",".join(map(str, config.lengths))
    opts = "".join(f" --option {k}={v}" for k, v in sorted(config.options.items()))
    return (
        f"longctx-eval build {info.name} --lengths {lengths} --depths {config.depths} --per-cell {config.per_cell} "
        f"--seed {config.seed} --source {config.source} --tokenizer {tokenizer.name}{opts} --out <DIR>"
    )


def _front_matter(
    info: BuilderInfo, config: BuildConfig, source: HaystackSource, tokenizer: Tokenizer, entries: list[ConfigEntry]
) -> dict:
    return {
        "pretty_name": f"longctx-eval {info.name} ({source.name}, {tokenizer.name})",
        "task_categories": list(info.card.task_categories),
        "tags": ["longctx-eval", *info.card.tags],
        "size_categories": [_size_category(sum(e.num_examples for e in entries))],
        "configs": [
            {
                "config_name": e.name,
                "data_files": [{"split": SPLIT, "path": e.paths if len(e.paths) > 1 else e.paths[0]}],
            }
            for e in entries
        ],
        "dataset_info": [
            {
                "config_name": e.name,
                "features": e.features._to_yaml_list(),
                "splits": [{"name": SPLIT, "num_bytes": e.num_bytes, "num_examples": e.num_examples}],
            }
            for e in entries
        ],
    }


def _provenance(
    info: BuilderInfo, config: BuildConfig, source: HaystackSource, tokenizer: Tokenizer, files: Mapping[str, str]
) -> dict:
    return {
        "builder": info.name,
        "builder_version": info.version,
        "suite_version": __version__,
        "pyarrow_version": pyarrow.__version__,  # parquet bytes are reproducible for one writer version
        "seed": config.seed,
        "lengths": list(config.lengths),
        "depths": config.depths,
        "per_cell": config.per_cell,
        "options": dict(sorted(config.options.items())),
        "source": {"spec": config.source, "name": source.name, "sha256": source.sha256},
        "tokenizer": {"name": tokenizer.name, "hub_id": tokenizer_hub_id(tokenizer.name), "sha256": tokenizer.sha256},
        **({"prompt_template": info.card.prompt_template} if info.card.prompt_template else {}),
        "dataset_sha256": dataset_sha256(files),
        "files": dict(sorted(files.items())),
    }


def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return label
    return "n>100K"


def _prompt_section(info: BuilderInfo) -> str:
    if not info.card.prompt_template:
        return ""
    return f"""## Prompt

The model sees `template.format(**fields)` with the row's fields (`context` is the row's context, rebuilt as
above when it is not stored in the row), as one user turn (a chat template, if the model has one, wraps it).
The template is also in the YAML front matter as `longctx_eval.prompt_template`:

````text
{info.card.prompt_template}
````

"""


def _scoring_section(info: BuilderInfo) -> str:
    return f"## Scoring\n\n{info.card.scoring}\n" if info.card.scoring else ""


def render_card(
    info: BuilderInfo,
    config: BuildConfig,
    source: HaystackSource,
    tokenizer: Tokenizer,
    entries: list[ConfigEntry],
    files: Mapping[str, str],
    license: str,
) -> str:
    """README.md text: YAML front matter (license, configs, dataset_info, provenance) and a readable body."""
    meta = {"license": license, **_front_matter(info, config, source, tokenizer, entries)}
    meta["longctx_eval"] = prov = _provenance(info, config, source, tokenizer, files)
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)
    first = next((e.name for e in entries if e.name != "documents"), entries[0].name if entries else "")
    rows = "\n".join(f"| `{e.name}` | {e.num_examples} | {', '.join(f'`{p}`' for p in e.paths)} |" for e in entries)
    hashes = "\n".join(f"| `{path}` | `{digest}` |" for path, digest in prov["files"].items())
    usage = info.card.usage(config) if callable(info.card.usage) else info.card.usage
    hub = f" (Hub: `{prov['tokenizer']['hub_id']}`)" if prov["tokenizer"]["hub_id"] else ""
    joined = any(e.name == "documents" for e in entries)
    load_docs = f'documents = load_dataset("<DIR or repo id>", "documents", split="{SPLIT}")\n' if joined else ""
    return f"""---
{front}---
{CARD_MARKER}

# longctx-eval `{info.name}` dataset

{info.description}

Built by [longctx-eval](https://github.com/longctx-eval/longctx-eval) {__version__}, builder `{info.name}`
version {info.version}. The same command with the same source, tokenizer, suite and pyarrow versions writes
byte-identical files:

```
{build_command(info, config, tokenizer)}
```

## Provenance

| what | name | sha256 |
|---|---|---|
| haystack source | `{source.name}` (spec `{config.source}`) | `{source.sha256}` |
| tokenizer | `{tokenizer.name}`{hub} | `{tokenizer.sha256}` |
| builder | `{info.name}` version {info.version} | |
| all data files | | `{prov["dataset_sha256"]}` |

Seed {config.seed}; lengths {", ".join(map(str, config.lengths))} tokens; {config.depths} depth(s);
{config.per_cell} repetition(s) per cell. Lengths are exact in {_tokenizer_line(tokenizer)}.

## Configs

| config | rows | files |
|---|---|---|
{rows}

```python
from datasets import load_dataset

rows = load_dataset("<DIR or repo id>", "{first}", split="{SPLIT}")
{load_docs}```

{usage}
{_prompt_section(info)}{_scoring_section(info)}## File hashes (sha256)

| file | sha256 |
|---|---|
{hashes}

## License

`{license}`. The text comes from the haystack source `{source.name}`; its license governs the documents.
{getattr(source, "license_note", "")}
"""
