"""Where a result came from: suite version and git commit, library versions, platform."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from longctx_eval.results import Environment, SuiteInfo

__version__ = "0.1.0"  # keep in step with pyproject.toml
REPO_ROOT = Path(__file__).resolve().parent.parent


def _pkg_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def suite_info() -> SuiteInfo:
    """Suite version and the git commit of this checkout ('-dirty' when files other than leaderboards/ changed)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            # results written into the checkout (the leaderboard a run updates) do not make its code dirty
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)leaderboards"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        git = head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        git = None
    return SuiteInfo(version=__version__, git=git or None)


def environment() -> Environment:
    """Versions of the interpreter and the libraries that change numbers."""
    return Environment(
        python=sys.version.split()[0],
        torch=_pkg_version("torch"),
        transformers=_pkg_version("transformers"),
        platform=platform.platform(),
    )
