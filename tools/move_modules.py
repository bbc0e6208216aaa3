"""Move Python modules with `git mv` and rewrite every reference to them across the repository.

Input: lines `old.dotted.name new.dotted.name` (a file, or stdin). For each pair the file moves (a new package
gets an `__init__.py`), then every tracked text file is rewritten in one pass: `from pkg import mod` statements
naming a moved module, dotted names (`pkg.mod`, `pkg.mod:attr`, `python -m pkg.mod`) and file paths
(`pkg/mod.py`, and the package-relative `sub/mod.py` form docs use). No alias is left behind: an old name
stops importing, so every reference must be one this rewrite reaches.

Usage: python tools/move_modules.py MOVES.txt
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".yml", ".yaml", ".sh", ".ini", ".js", ".css", ".json"}
SKIP = {"LEAD-NOTES.md", "tools/move_modules.py"}


def _path(module: str, root: Path) -> Path:
    """The file of a dotted module name (a package's __init__.py)."""
    base = root / module.replace(".", "/")
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _tracked(root: Path) -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    files = []
    for rel in out.splitlines():
        p = root / rel
        if rel in SKIP or not p.is_file():
            continue
        if p.suffix in TEXT_SUFFIXES or p.name in {"Makefile", "run"}:
            files.append(p)
    return files


def _move(moves: dict[str, str], root: Path) -> None:
    for old, new in moves.items():
        src, dst = _path(old, root), root / (new.replace(".", "/") + ".py")
        if src.name == "__init__.py":  # a package moves as its __init__.py; its other modules are listed too
            dst = root / new.replace(".", "/") / "__init__.py"
        if dst.exists() and not src.exists():  # moved by an earlier, interrupted run
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        package = dst.parent.parent if dst.name == "__init__.py" else dst.parent
        while package != root and not (package / "__init__.py").exists():
            init = package / "__init__.py"
            init.write_text(f'"""{package.relative_to(root).as_posix()}: see docs/architecture.md."""\n')
            subprocess.run(["git", "add", str(init)], cwd=root, check=True)
            package = package.parent
        subprocess.run(["git", "mv", str(src), str(dst)], cwd=root, check=True)


def _rewrite_from_imports(text: str, moves: dict[str, str]) -> str:
    """`from a import m` where a.m moved: one statement per resulting source module."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if not any(f"{node.module}.{a.name}" in moves for a in node.names):
            continue
        groups: dict[str, list[str]] = {}
        for a in node.names:
            full = f"{node.module}.{a.name}"
            if full in moves:
                parent, _, leaf = moves[full].rpartition(".")
                alias = a.asname or a.name
                groups.setdefault(parent, []).append(leaf if alias == leaf else f"{leaf} as {alias}")
            else:
                groups.setdefault(moves.get(node.module, node.module), []).append(
                    a.name + (f" as {a.asname}" if a.asname else "")
                )
        first = lines[node.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        last = lines[node.end_lineno - 1]  # type: ignore[index]
        comment = last[last.index("#") :].rstrip("\n") if "#" in last and node.lineno == node.end_lineno else ""
        stmts = [f"{indent}from {mod} import {', '.join(names)}" for mod, names in groups.items()]
        if comment:
            stmts[0] += "  " + comment
        edits.append((node.lineno, node.end_lineno, "".join(s + "\n" for s in stmts)))
    for start, end, new in sorted(edits, reverse=True):
        lines[start - 1 : end] = [new]
    return "".join(lines)


def _patterns(moves: dict[str, str]) -> tuple[re.Pattern[str], dict[str, str]]:
    table: dict[str, str] = {}
    for old, new in moves.items():
        table[old] = new
        old_path, new_path = old.replace(".", "/") + ".py", new.replace(".", "/") + ".py"
        table[old_path] = new_path
        old_rel, new_rel = old_path.split("/", 1)[1], new_path.split("/", 1)[1]
        if "/" in old_rel:  # `models/hf.py` inside the package's own docs
            table[old_rel] = new_rel
    keys = sorted(table, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./])(" + "|".join(re.escape(k) for k in keys) + r")(?![\w])")
    return pattern, table


def rewrite(text: str, moves: dict[str, str], is_python: bool) -> str:
    """Every reference to a moved module in one file's text."""
    pattern, table = _patterns(moves)
    text = pattern.sub(lambda m: table[m.group(1)], text)  # first: the from-import rewrite writes new names
    return _rewrite_from_imports(text, moves) if is_python else text


def main(argv: list[str]) -> int:
    """Move the modules listed in argv[1] and rewrite the repository."""
    pairs = [line.split() for line in Path(argv[1]).read_text().splitlines() if line.strip() and line[0] != "#"]
    moves = {old: new for old, new in pairs}
    _move(moves, ROOT)
    for path in _tracked(ROOT):
        text = path.read_text()
        new = rewrite(text, moves, path.suffix == ".py")
        if new != text:
            path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
