"""Length labels on tables and plots: what the suites and `--lengths` call each length."""

from __future__ import annotations

from longctx_eval.scoring.labels import length_label


def test_length_labels_name_millions_as_m_and_thousands_as_k() -> None:
    assert [length_label(n) for n in (None, 448, 1024, 131072, 1048576, 2 * 1048576, 1048576 + 1024)] == [
        "all",
        "448",
        "1K",
        "128K",
        "1M",
        "2M",
        "1025K",
    ]
