"""`run`'s list flags: given twice they add up (`--model a --model b` runs both), never keep only the last."""

from __future__ import annotations

from longctx_eval.cli import build_parser


def test_repeated_list_flags_join_and_defaults_stay() -> None:
    parser = build_parser()
    args = parser.parse_args(["run", "--model", "bm25", "--model", "coref:baseline", "--tasks", "needle"])
    assert (args.model, args.tasks, args.lengths) == ("bm25,coref:baseline", "needle", "default")
    args = parser.parse_args(["run", "--tasks", "needle", "--tasks", "mrcr", "--lengths", "1k", "--lengths", "4k"])
    assert (args.model, args.tasks, args.lengths) == ("default", "needle,mrcr", "1k,4k")
