"""One error hierarchy: the CLI prints any LongctxError as one line, without a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class LongctxError(Exception):
    """Base of every error the suite raises on purpose; its message says what, where and what was expected."""


class ConfigError(LongctxError):
    """A configuration value, CLI argument or model spec is malformed or unknown."""


class NotInstalled(ConfigError):
    """A spec names an opt-in embedded model whose package is not installed (the message names the make target).

    A suite skips such a model with this line unless the run names it (`--part`); elsewhere it is a ConfigError.
    `name`: the model's run-folder name, where the spec got that far."""

    name: str | None = None


class TaskDefinitionError(LongctxError):
    """A task plugin is malformed: raised at discovery, naming the file and the expected form."""


class RunFileError(LongctxError):
    """A run file or predictions file is corrupt or does not match the schema."""


class OutputError(LongctxError):
    """A file cannot be written (full disk, permissions, read-only file system); nothing already written is lost."""


class DataError(LongctxError):
    """Input data (a source, a corpus file, a length request) cannot be used as asked."""


class PrerequisiteError(LongctxError):
    """Something the run needs is not installed or cannot be loaded offline."""


class ModelFileError(PrerequisiteError):
    """A model's own files (config, weights, GGUF) were rejected by their loader: bad input, exit status 2."""


class TaskUnavailable(LongctxError):
    """A task cannot run here (its data is missing or licensed elsewhere): the runner skips it with this reason."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A ' Did you mean X? Known: a, b, c.' suffix for an unknown name."""
    known = sorted(set(known))
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"{hint} Known: {', '.join(known) if known else '(none)'}."
