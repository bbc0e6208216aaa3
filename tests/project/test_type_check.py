"""tools/type_check.py keys mypy's errors without line numbers and fails only on errors not in the baseline."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("type_check", REPO / "tools" / "type_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("type_check", module)
    spec.loader.exec_module(module)
    return module


OUTPUT = """\
longctx_eval/a.py:12: error: Incompatible return value type (got "int", expected "str")  [return-value]
longctx_eval/a.py:40:5: error: Incompatible return value type (got "int", expected "str")  [return-value]
longctx_eval/a.py:41: note: see https://mypy.readthedocs.io
data_builders/b.py:3: error: Name "x" is not defined  [name-defined]
Found 3 errors in 2 files (checked 2 source files)
"""


def test_errors_are_keyed_without_line_numbers_and_counted():
    keys = _tool().error_keys(OUTPUT)
    assert keys == Counter(
        {
            'longctx_eval/a.py: Incompatible return value type (got "int", expected "str")  [return-value]': 2,
            'data_builders/b.py: Name "x" is not defined  [name-defined]': 1,
        }
    )


def test_only_errors_beyond_the_baseline_are_new(tmp_path):
    tool = _tool()
    current = tool.error_keys(OUTPUT)
    baseline_file = tmp_path / "baseline.txt"
    baseline_file.write_text(
        "# header\n"
        'longctx_eval/a.py: Incompatible return value type (got "int", expected "str")  [return-value]\n'
        "longctx_eval/c.py: fixed meanwhile  [misc]\n"
    )
    new, fixed = tool.compare(current, tool.read_baseline(baseline_file))
    assert new == [
        'data_builders/b.py: Name "x" is not defined  [name-defined]',
        'longctx_eval/a.py: Incompatible return value type (got "int", expected "str")  [return-value]',
    ]
    assert fixed == ["longctx_eval/c.py: fixed meanwhile  [misc]"]


def test_the_repository_baseline_parses():
    baseline = _tool().read_baseline()
    assert all(": " in key and key.rstrip().endswith("]") for key in baseline)
