"""`longctx-eval leaderboard`: merge run files into leaderboard.json, LEADERBOARD.md and plots."""

from __future__ import annotations

import argparse
from pathlib import Path

from longctx_eval.progress import console, console_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `leaderboard`."""
    p = sub.add_parser("leaderboard", help="merge run files into leaderboard.json and render it")
    p.add_argument("inputs", nargs="*", type=Path, default=[Path("results")], help="run files or folders")
    p.add_argument("--out", type=Path, default=Path("leaderboards"))
    p.add_argument(
        "--site",
        type=Path,
        metavar="DIR",
        help="also write the board as a static website (HTML, CSS, a small script; relative links) into DIR",
    )
    p.add_argument(
        "--min-n",
        type=_min_n,
        default=30,
        metavar="N",
        help="cells with fewer samples are marked 'low n' and kept out of ranking, effective length and contrasts "
        "(default 30)",
    )
    p.add_argument(
        "--per-sample",
        action="store_true",
        help="also copy each input run folder's per-sample scores (gzip) into OUT/per-sample/, for `compare`",
    )
    p.set_defaults(func=cmd_leaderboard)


def _min_n(text: str) -> int:
    """`--min-n N`: a whole number of samples >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of samples >= 1, e.g. 30")
    return value


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Merge and render; exit 2 when an input run file is corrupt, invalid or names what the board cannot name a
    file after (it is skipped, the rest merged)."""
    from longctx_eval.leaderboard.build import update_leaderboard

    report = update_leaderboard(list(args.inputs), args.out, site=args.site, min_n=args.min_n)
    if args.per_sample:
        from longctx_eval.leaderboard.per_sample import publish

        written = publish(list(args.inputs), args.out)
        where = console_text(args.out / "per-sample")
        console.print(f"per-sample scores: {len(written)} file(s) under {where}", highlight=False)
    # Paths, names and reasons come from run files and folders: console_text shows any markup in them as text.
    for path, reason in report.skipped:
        console.print(f"[red]skipped[/red] {console_text(f'{path}: {reason}')}", highlight=False, soft_wrap=True)
    for path, reason in report.unfinished:
        console.print(f"[yellow]not read[/yellow] {console_text(f'{path}: {reason}')}", highlight=False, soft_wrap=True)
    for note in report.notes:
        where = f"{note.model} {note.task}" if note.task else note.model
        text = console_text(f"{where} ({note.run}): {note.reason}")
        console.print(f"[yellow]note[/yellow] {text}", highlight=False, soft_wrap=True)
    for path in report.removed:
        console.print(f"removed stale {console_text(path)}", highlight=False)
    board = console_text(args.out / "leaderboard.json")
    console.print(f"leaderboard: {report.entries} model(s) in {board}", highlight=False)
    if args.site is not None:
        console.print(f"site: {console_text(args.site / 'index.html')}", highlight=False)
    return report.exit_code
