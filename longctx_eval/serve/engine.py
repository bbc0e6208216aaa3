"""The model behind `longctx-eval serve`: an `hf:` adapter's weights and chat template, generating token by token.

Prompts are rendered exactly as the `hf` adapter renders them (`HFCausalLM.render`), and greedy decoding calls
`generate` with the adapter's arguments (and its neutral generation config: no shipped penalty applies), so a
reply through the server equals the in-process reply. Tokens are handed over as they are generated (a streamer
in a worker thread), so time to first token is real. Tensors are built on the model's device (`device=` of the
spec); only token ids come back to the host.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from longctx_eval.capability import Capability
from longctx_eval.errors import ConfigError

MIN_SAMPLING_TEMPERATURE = 1e-5
"""Temperatures below this decode greedily (vLLM's floor too). Sampling divides the logits by the temperature: a
smaller divisor overflows float32 to inf (1e-300 is 0 in float32) and softmax gives NaN, while at 1e-5 a token
whose logit trails the top one by 1e-4 already has e^-10 of its probability, so the limit is greedy anyway."""


@dataclass(frozen=True)
class Sampling:
    """Decoding settings of one request: greedy when `temperature` is below MIN_SAMPLING_TEMPERATURE (0 included)."""

    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        """Whether this request decodes greedily (argmax), the seed and top_p then having no effect."""
        return self.temperature < MIN_SAMPLING_TEMPERATURE


@dataclass
class Completion:
    """What one generation produced, filled in while it streams."""

    prompt_tokens: int
    text: str = ""
    completion_tokens: int = 0
    finish_reason: str | None = None
    """`stop` (end-of-sequence token or a stop string) or `length` (max_tokens reached)."""


class TextAssembler:
    """Incremental detokenisation with stop strings: the text safe to send after each token, and the final text.

    Text that could still become a stop string, or an incomplete UTF-8 character, is held back until the next
    token decides it; the end-of-sequence token ends the reply without text (as the adapter decodes it)."""

    def __init__(self, decode: Callable[[list[int]], str], eos_ids: Sequence[int], stop: Sequence[str]) -> None:
        self._decode = decode
        self._eos = set(eos_ids)
        self._stop = [s for s in stop if s]
        self._ids: list[int] = []
        self.text = ""
        self.sent = 0
        self.tokens = 0
        self.finish_reason: str | None = None

    def add(self, token: int) -> str:
        """Take one generated token; returns the newly sendable text (possibly empty)."""
        self.tokens += 1
        if token in self._eos:
            self.finish_reason = "stop"
            return self.flush()
        self._ids.append(token)
        full = self._decode(self._ids)
        hits = [i for i in (full.find(s) for s in self._stop) if i >= 0]
        if hits:
            self.text = full[: max(min(hits), self.sent)]
            self.finish_reason = "stop"
            return self.flush()
        self.text = full
        safe = len(full) - self._held_back(full)
        if safe <= self.sent:
            return ""
        out, self.sent = full[self.sent : safe], safe
        return out

    def flush(self) -> str:
        """Everything not yet sent (at the end of the reply)."""
        out, self.sent = self.text[self.sent :], len(self.text)
        return out

    def _held_back(self, full: str) -> int:
        hold = len(full) - len(full.rstrip("\ufffd"))  # an incomplete multi-byte character decodes as U+FFFD
        for s in self._stop:
            hold = max(hold, partial_stop(full, s))
        return hold


def partial_stop(text: str, stop: str) -> int:
    """The length of the longest proper prefix of `stop` that `text` ends with (0 if none): text to hold back.

    Candidates are found with str.rfind on the text's last 8 characters, so a long stop string costs a few C-level
    searches per token rather than one Python step per character of the reply."""
    longest = min(len(stop) - 1, len(text))
    m = min(8, longest)
    if m <= 0:
        return 0
    tail, end = text[-m:], longest
    while (j := stop.rfind(tail, 0, end)) >= 0:  # stop[j:j+m] == tail: stop[:j+m] may be what text ends with
        if text.endswith(stop[: j + m]):
            return j + m
        end = j + m - 1
    for k in range(m - 1, 0, -1):  # prefixes shorter than the tail
        if text.endswith(stop[:k]):
            return k
    return 0


class _TokenFeed:
    """A transformers streamer that passes each generated token id to the event loop (the prompt is skipped)."""

    def __init__(self, put: Callable[[tuple[str, Any]], None]) -> None:
        self._put = put
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        if not self._prompt_seen:  # generate() first hands over the prompt ids
            self._prompt_seen = True
            return
        for token in value.reshape(-1).tolist():
            self._put(("token", int(token)))

    def end(self) -> None:
        """Nothing to do: the worker thread reports the end itself (also after an error)."""


class GenerationError(RuntimeError):
    """The model raised while generating."""


class HFEngine:
    """One loaded `hf:` model; `stream` runs one generation at a time (callers serialise with `lock`)."""

    def __init__(self, adapter: Any, name: str) -> None:
        import torch

        self._torch = torch
        self.adapter = adapter
        self.model = adapter.model
        self.hf_tok = adapter.hf_tok
        self.name = name
        self.window: int | None = adapter.meta.context_window
        self.lock = asyncio.Lock()
        self.pad_id = self.hf_tok.pad_token_id if self.hf_tok.pad_token_id is not None else (adapter.eos_ids or [0])[0]
        self.device = adapter.input_device
        from longctx_eval.serve.prompt_scoring import PromptScorer

        self.scorer = PromptScorer(self.model)
        """Scores echo requests' prompts (`/v1/completions` with echo and logprobs), under `lock` like generation."""

    @classmethod
    def load(cls, spec_text: str, name: str | None = None) -> HFEngine:
        """Load the `hf:` model a spec names (any spec the `hf` adapter takes, e.g. `smollm2-135m`)."""
        from longctx_eval.models.loader import load_model
        from longctx_eval.models.spec import parse_spec

        spec = parse_spec(spec_text)
        if spec.kind != "hf":
            raise ConfigError(
                f"serve takes an hf: model spec (e.g. smollm2-135m or hf:/path/to/model); {spec_text!r} is a "
                f"{spec.kind!r} spec"
            )
        adapter = load_model(spec)
        if Capability.GENERATE not in adapter.capabilities:
            served = ", ".join(sorted(str(c) for c in adapter.capabilities))
            raise ConfigError(f"model {spec_text!r} does not generate text (it serves only {served})")
        return cls(adapter, name or spec.name)

    # -- prompts -----------------------------------------------------------------------------------------
    def chat_ids(
        self, messages: list[dict[str, str]], add_generation_prompt: bool = True, continue_final_message: bool = False
    ) -> list[int]:
        """Token ids of a conversation, rendered as the `hf` adapter renders its one-message prompts."""
        if not self.adapter.use_chat:
            if len(messages) == 1 and messages[0]["role"] == "user":  # the adapter's plain-prompt form
                return self.hf_tok(messages[0]["content"], add_special_tokens=True)["input_ids"]
            raise ValueError(
                "this model has no chat template: send one user message, or use /v1/completions with the exact prompt"
            )
        text = self.hf_tok.apply_chat_template(
            messages,
            add_generation_prompt=add_generation_prompt and not continue_final_message,
            continue_final_message=continue_final_message,
            tokenize=False,
        )
        return self.hf_tok(text, add_special_tokens=False)["input_ids"]

    def text_ids(self, prompt: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of a raw completion prompt (the adapter's template-less form)."""
        return self.hf_tok(prompt, add_special_tokens=add_special_tokens)["input_ids"]

    def decode(self, ids: list[int]) -> str:
        """Text of token ids, special tokens dropped (as the adapter decodes replies)."""
        return self.hf_tok.decode(ids, skip_special_tokens=True)

    def vocab_size(self) -> int:
        """Number of token ids the tokenizer knows."""
        return len(self.hf_tok)

    # -- generation --------------------------------------------------------------------------------------
    async def stream(self, ids: list[int], sampling: Sampling, out: Completion) -> AsyncGenerator[str, None]:
        """Generate from `ids`, yielding the text each token adds ('' when held back); fills `out` as it goes.

        Detokenising and stop-string matching run in the worker thread with the model, never on the event loop
        (a request's stop list can be megabytes). Closing the iterator early (a client that went away) stops the
        generation after its current step and waits for the worker thread, so the next request finds the model
        free."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancel = threading.Event()
        asm = TextAssembler(self.decode, self.adapter.eos_ids, sampling.stop)

        def put(item: tuple[str, Any]) -> None:  # in the worker thread
            if item[0] == "token":
                if asm.finish_reason is not None:
                    return  # a token generated after a stop string, before the cancel took effect
                text = asm.add(item[1])
                if asm.finish_reason is not None:
                    cancel.set()
                item = ("text", (text, asm.text, asm.tokens))
            loop.call_soon_threadsafe(queue.put_nowait, item)

        worker = threading.Thread(target=self._generate, args=(ids, sampling, put, cancel), daemon=True)
        done = False
        worker.start()
        try:
            while True:
                kind, value = await queue.get()
                if kind == "done":
                    done = True
                    if value is not None:
                        raise GenerationError(f"generation failed: {value}") from value
                    break
                text, out.text, out.completion_tokens = value
                yield text
            # the worker has finished: the assembler is this thread's now
            if asm.finish_reason is None:  # the token budget ran out
                asm.finish_reason = "length"
                tail = asm.flush()
                if tail:
                    yield tail
            out.text, out.completion_tokens, out.finish_reason = asm.text, asm.tokens, asm.finish_reason
        finally:
            cancel.set()
            while not done:  # let the worker finish before the model is used again
                done = (await queue.get())[0] == "done"

    def _generate(
        self, ids: list[int], sampling: Sampling, put: Callable[[tuple[str, Any]], None], cancel: threading.Event
    ) -> None:
        torch = self._torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        class Cancelled(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                return torch.full((input_ids.shape[0],), cancel.is_set(), dtype=torch.bool, device=input_ids.device)

        error: BaseException | None = None
        try:  # everything in the worker is inside: whatever raises, "done" is sent and the engine is free again
            if not sampling.greedy:
                decoding: dict[str, Any] = {
                    "do_sample": True,
                    "temperature": sampling.temperature,
                    "top_p": sampling.top_p,
                    "top_k": 0,
                }
                if sampling.seed is not None:
                    torch.manual_seed(sampling.seed)
            else:  # greedy, as the adapter decodes (its generation config is the neutral one)
                decoding = {"do_sample": False}
            with torch.no_grad():
                self.model.generate(
                    input_ids=torch.tensor([ids], device=self.device),
                    attention_mask=torch.ones((1, len(ids)), dtype=torch.long, device=self.device),
                    max_new_tokens=sampling.max_tokens,
                    pad_token_id=self.pad_id,
                    eos_token_id=self.adapter.eos_ids or None,
                    streamer=_TokenFeed(put),
                    stopping_criteria=StoppingCriteriaList([Cancelled()]),
                    **decoding,
                )
        except BaseException as exc:  # reported to the request, the server keeps serving
            error = exc
        finally:
            put(("done", error))
