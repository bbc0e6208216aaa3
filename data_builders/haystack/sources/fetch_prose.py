"""`python -m data_builders.haystack.sources.fetch_prose`: fetch, verify and build the `austen` corpus once
(idempotent)."""

from __future__ import annotations

import argparse
import sys
import time

from data_builders.haystack.sources.austen import DEBS_ENV, ensure_corpus
from longctx_eval.errors import LongctxError


def main(argv: list[str] | None = None) -> int:
    """Build the corpus into the cache unless it is already there; print where it is, or why not."""
    parser = argparse.ArgumentParser(prog="python -m data_builders.haystack.sources.fetch_prose", description=__doc__)
    parser.add_argument(
        "--offline", action="store_true", help=f"never call apt-get; use cached or ${DEBS_ENV} .deb files only"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        path, cached = ensure_corpus(download=not args.offline)
    except LongctxError as exc:
        print(f"fetch_prose: error: {exc}", file=sys.stderr)
        return 1
    how = "already cached" if cached else f"built in {time.perf_counter() - start:.1f} s"
    print(f"haystack source 'austen': {path} ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
