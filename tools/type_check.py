"""`make lint`'s type check: mypy over the core and the builders, failing on any error not in the baseline.

mypy runs with the config in pyproject.toml ([tool.mypy]). Each error is keyed without its line number
(`path: message [code]`), so editing a file does not shift the baseline; tools/mypy_baseline.txt lists the
errors known when the check was introduced. A new error fails the check; a fixed one is reported so its line
can be deleted (`--update` rewrites the baseline from the current errors).

Usage: python tools/type_check.py [--update]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tools" / "mypy_baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+(?::\d+)?: error: (?P<message>.*)$")


def error_keys(output: str) -> Counter[str]:
    """mypy's error lines as `path: message [code]` keys (line numbers dropped), counted."""
    keys: Counter[str] = Counter()
    for line in output.splitlines():
        match = ERROR.match(line.strip())
        if match:
            keys[f"{match['path']}: {match['message']}"] += 1
    return keys


def compare(current: Counter[str], baseline: Counter[str]) -> tuple[list[str], list[str]]:
    """(new errors, fixed errors), each key repeated by how many more or fewer times it occurs."""
    new = sorted((current - baseline).elements())
    fixed = sorted((baseline - current).elements())
    return new, fixed


def read_baseline(path: Path = BASELINE) -> Counter[str]:
    """The baseline's keys (one a line; '#' lines are comments)."""
    if not path.is_file():
        return Counter()
    return Counter(line for line in path.read_text("utf-8").splitlines() if line and not line.startswith("#"))


def main(argv: list[str] | None = None) -> int:
    """Run mypy and compare with the baseline; exit 1 on a new error."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the baseline from the current errors")
    args = parser.parse_args(argv)
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False)
    current = error_keys(run.stdout)
    if run.returncode not in (0, 1) or (run.returncode == 1 and not current):  # mypy itself failed
        print(run.stdout + run.stderr, file=sys.stderr)
        return 2
    if args.update:
        header = "# mypy errors known when the type check came in (tools/type_check.py); delete lines once fixed\n"
        BASELINE.write_text(header + "".join(f"{k}\n" for k in sorted(current.elements())), "utf-8")
        print(f"baseline: {sum(current.values())} errors")
        return 0
    new, fixed = compare(current, read_baseline())
    for key in new:
        print(f"new type error: {key}")
    if fixed:
        print(f"{len(fixed)} baseline error(s) fixed: delete them from {BASELINE.relative_to(ROOT)} (or --update)")
    print(f"mypy: {sum(current.values())} known error(s) in the baseline, {len(new)} new")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
