"""The `longctx-eval build` command: a registered builder's dataset written as parquet plus a dataset card.

Registered with the CLI through the `longctx_eval.commands` entry point group (`build = data_builders.dataset.command`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from longctx_eval.errors import ConfigError
from longctx_eval.progress import console, console_text, progress_bar
from longctx_eval.run.config import parse_lengths


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `build` to the CLI."""
    build = sub.add_parser("build", help="build a dataset (parquet + dataset card) loadable with datasets")
    build.add_argument("builder", help="builder name, e.g. needle")
    build.add_argument("--lengths", required=True, help="context lengths in tokens, e.g. 1k,4k,1M")
    build.add_argument("--depths", type=int, default=10, help="needle depths per length, 0..1 evenly (default 10)")
    build.add_argument("--per-cell", type=int, default=1, help="repetitions per length x depth (default 1)")
    build.add_argument("--seed", type=int, default=0, help="every random choice derives from it (default 0)")
    build.add_argument("--source", default="default", help="haystack source spec (default: 'default')")
    build.add_argument("--tokenizer", default="smollm2-135m", help="lengths are exact in it (default smollm2-135m)")
    build.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="builder option, e.g. flat=true (needle: full context in every row)",
    )
    build.add_argument("--license", default=None, help="HF license id for the card (default: the source's)")
    build.add_argument("--out", type=Path, required=True, help="output folder (empty, or an earlier build)")
    build.add_argument("--push-to-hub", metavar="REPO_ID", default=None, help="also upload to this HF dataset repo")
    build.set_defaults(func=cmd_build)


def parse_options(items: list[str]) -> dict[str, str]:
    """`--option KEY=VALUE` items as a dict; ConfigError for an item without '='."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int | None], None] | None]:
    """A rich bar on a terminal; nothing in logs and pipes."""
    if not console.is_terminal:
        yield None
        return
    with progress_bar() as bar:
        task = bar.add_task(console_text(label), total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def cmd_build(args: argparse.Namespace) -> int:
    """Build a dataset with a registered builder, write it to --out, and optionally push it to the Hub."""
    from data_builders.dataset.export import build_dataset
    from data_builders.dataset.hub import check_hub, push_to_hub
    from data_builders.dataset.registry import BuildConfig, check_options, get_builder
    from data_builders.haystack.assembly import get_source
    from longctx_eval.models.assets import load_tokenizer

    lengths = parse_lengths(args.lengths)
    if not lengths:
        raise ConfigError("--lengths: expected token counts such as 1k,4k,1M ('default' is for `run`)")
    config = BuildConfig(
        lengths=lengths,
        depths=args.depths,
        per_cell=args.per_cell,
        seed=args.seed,
        source=args.source,
        options=parse_options(args.option),
    )
    # Everything that can be checked cheaply is checked before the slow parts.
    check_options(get_builder(args.builder), config.options)
    if args.push_to_hub:
        check_hub(args.push_to_hub)  # offline: fail now, not after an hour of building
    source = get_source(config.source)
    tokenizer = load_tokenizer(args.tokenizer)
    with _progress(f"build {args.builder}") as progress:
        report = build_dataset(
            args.builder, config, args.out, tokenizer, source=source, license=args.license, progress=progress
        )
    rows = sum(e.num_examples for e in report.configs if e.name != "documents")
    console.print(
        f"wrote {rows} samples in {len(report.configs)} configs ({len(report.files)} parquet files + README.md) "
        f"to {report.out} in {report.seconds:.1f} s",
        highlight=False,
        markup=False,
    )
    if args.push_to_hub:
        console.print(f"pushed to {push_to_hub(report.out, args.push_to_hub)}", highlight=False, markup=False)
    return 0
