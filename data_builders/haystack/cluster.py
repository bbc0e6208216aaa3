"""The cluster of a sample built on a haystack: samples sharing one haystack are not independent (their contexts
differ only where a needle or fact sits), so they share a cluster (`longctx_eval.sample.cluster_of`)."""

from __future__ import annotations


def haystack_cluster(haystack_seed: int) -> str:
    """The cluster name of the samples built on the haystack drawn with `haystack_seed`, e.g. "haystack-1a2b3c4d"."""
    return f"haystack-{haystack_seed:08x}"
