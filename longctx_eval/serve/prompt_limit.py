"""The largest prompt `serve` tokenises (`--max-prompt-chars`): a prompt over it is refused with a 413 before any
tokenising or template rendering, so one huge body cannot hold the server's CPU and memory for many seconds."""

from __future__ import annotations

from dataclasses import dataclass

CHARS_PER_TOKEN = 32
"""The default allows this many characters per token of the window: English runs ~4-5 characters a token, so a
prompt longer than this cannot fit the window unless it is made of unusually long tokens."""
NO_WINDOW_CHARS = 8 * 1024 * 1024
"""The default for a model whose context window is unknown."""


@dataclass(frozen=True)
class PromptLimit:
    """At most `max_chars` characters of prompt text (a completion prompt, or all messages' contents together)."""

    max_chars: int
    origin: str
    """How the limit was set, for the refusal (e.g. `--max-prompt-chars`)."""

    @classmethod
    def for_window(cls, window: int | None, max_chars: int | None = None) -> PromptLimit:
        """`max_chars` as the operator set it, else the default for a model with this context window."""
        if max_chars is not None:
            return cls(max_chars, "--max-prompt-chars")
        if window is None:
            return cls(NO_WINDOW_CHARS, "the default of --max-prompt-chars for a model without a known window")
        return cls(
            CHARS_PER_TOKEN * window,
            f"the default of --max-prompt-chars: {CHARS_PER_TOKEN} per token of the {window}-token window",
        )

    def refusal(self, chars: int, param: str) -> str | None:
        """The message refusing a prompt of `chars` characters, or None when it is within the limit."""
        if chars <= self.max_chars:
            return None
        return (
            f"'{param}' is {chars:,} characters; this server tokenises prompts of at most {self.max_chars:,} "
            f"characters ({self.origin}). Send a shorter prompt, or start the server with a larger --max-prompt-chars"
        )
