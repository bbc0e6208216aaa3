"""`longctx-eval schema`: write the JSON Schema of run files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from longctx_eval.progress import console


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `schema`."""
    p = sub.add_parser("schema", help="write the run-file JSON Schema")
    p.add_argument("--out", type=Path, default=Path("leaderboards/schema.json"))
    p.set_defaults(func=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    """Write the schema atomically."""
    from longctx_eval.atomic_io import atomic_write_text
    from longctx_eval.results import json_schema

    atomic_write_text(args.out, json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
    console.print(f"wrote {args.out}", highlight=False, markup=False)
    return 0
