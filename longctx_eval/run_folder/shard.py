"""`run --shard I/N`: a deterministic 1/N of every task's samples, whole clusters (a haystack, a document) dealt
round robin in the order they first appear, so N processes (one per GPU, a Slurm array) split a run and
`longctx-eval merge` puts it back together exactly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from longctx_eval.errors import ConfigError

MAX_SHARDS = 4096


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str, where: str = "--shard") -> Shard:
        """'2/8' -> Shard(2, 8); anything else is one line naming what was expected."""
        index, sep, count = text.strip().partition("/")
        if sep and index.isdigit() and count.isdigit():
            shard = cls(int(index), int(count))
            if 1 <= shard.index <= shard.count <= MAX_SHARDS:
                return shard
        raise ConfigError(f"{where} {text!r}: expected I/N with 1 <= I <= N <= {MAX_SHARDS}, e.g. 1/4")

    @property
    def label(self) -> str:
        """'2/8' as written on the command line."""
        return f"{self.index}/{self.count}"

    @property
    def folder_suffix(self) -> str:
        """What the shard's run folder name carries after the model's: '.shard-2-of-8'."""
        return f".shard-{self.index}-of-{self.count}"

    def positions(self, clusters: Sequence[str]) -> list[int]:
        """The positions this shard keeps of samples whose clusters are `clusters` (in the unsharded order):
        the distinct clusters in order of first appearance, the k-th (from 0) to shard k mod N + 1."""
        rank: dict[str, int] = {}
        for cluster in clusters:
            rank.setdefault(cluster, len(rank))
        return [i for i, c in enumerate(clusters) if rank[c] % self.count == self.index - 1]
