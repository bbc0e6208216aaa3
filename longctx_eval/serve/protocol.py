"""The OpenAI wire format `longctx-eval serve` speaks: request checks, response and stream-chunk shapes, errors.

Unsupported features (n > 1, the reply's logprobs, tools, penalties) are refused with a 400 naming the field, never
silently ignored, so a client never scores output produced under settings it did not ask for.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from longctx_eval.serve.engine import MIN_SAMPLING_TEMPERATURE, Completion, HFEngine, Sampling
from longctx_eval.serve.prompt_limit import PromptLimit
from longctx_eval.serve.prompt_scoring import PromptScores

ROLES = ("system", "developer", "user", "assistant")
MAX_ECHO_LOGPROBS = 5
"""Most top tokens per position an echo request may ask for (OpenAI's legacy limit)."""


class APIError(Exception):
    """A request the server refuses, with the HTTP status and OpenAI's error fields."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        """OpenAI's error JSON: {"error": {"message", "type", "param", "code"}}."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad(message: str, param: str | None = None, code: str | None = None) -> APIError:
    """A 400 invalid_request_error."""
    return APIError(400, message, param=param, code=code)


def check_prompt_size(limit: PromptLimit, chars: int, param: str) -> None:
    """A 413 `prompt_too_large` naming the limit when a prompt of `chars` characters is over it (before tokenising)."""
    message = limit.refusal(chars, param)
    if message is not None:
        raise APIError(413, message, param=param, code="prompt_too_large")


@dataclass(frozen=True)
class Job:
    """One checked generation request."""

    kind: Literal["chat", "completion"]
    ids: list[int]
    sampling: Sampling
    stream: bool
    include_usage: bool
    echo_logprobs: int | None = None
    """A completions request with `echo: true, logprobs: N`: the prompt is scored (prompt_scoring.py), N top tokens
    per position, and at most one greedy token is generated; None for every other request."""


# -- field checks --------------------------------------------------------------------------------------------
def _shown(value: Any, width: int = 60) -> str:
    """`value`'s repr for an error message, cut to `width` characters (a client may send a 4,000-digit number)."""
    text = repr(value)
    return text if len(text) <= width else f"{text[: width - 3]}... ({len(text):,} characters)"


def _number(body: dict[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(f"'{name}' must be a number, got {_shown(value)}", name)
    if isinstance(value, float) and not math.isfinite(value):  # an int of any size is compared as it is
        raise bad(f"'{name}' must be a finite number, got {_shown(value)}", name)
    if not lo <= value <= hi:
        raise bad(f"'{name}' must be between {lo:g} and {hi:g}, got {_shown(value)}", name)
    return float(value)


def _int(body: dict[str, Any], name: str, lo: int, hi: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"'{name}' must be an integer, got {_shown(value)}", name)
    if value < lo:
        raise bad(f"'{name}' must be at least {lo}, got {_shown(value)}", name)
    if hi is not None and value > hi:
        raise bad(f"'{name}' must be at most {hi}, got {_shown(value)}", name)
    return value


def _bool(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad(f"'{name}' must be true or false, got {_shown(value)}", name)
    return value


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return tuple(value)
    raise bad(f"'stop' must be a string or a list of strings, got {_shown(value)}", "stop")


def _refuse_unsupported(body: dict[str, Any], kind: str = "chat") -> None:
    if _int(body, "n", 1) not in (None, 1):
        raise bad("'n' must be 1: this server returns one choice per request", "n")
    for name in ("logprobs", "echo") if kind == "chat" else ():
        if body.get(name) not in (None, False, 0):
            raise bad(f"'{name}' is not supported by this server", name)
    for name in ("tools", "functions", "logit_bias", "suffix"):
        if body.get(name):
            raise bad(f"'{name}' is not supported by this server", name)
    for name in ("presence_penalty", "frequency_penalty"):
        if _number(body, name, 0.0, -2.0, 2.0) != 0.0:
            raise bad(f"'{name}' is not supported by this server (send 0 or leave it out)", name)
    if _number(body, "repetition_penalty", 1.0, 0.0, 10.0) != 1.0:
        raise bad("'repetition_penalty' is not supported by this server (send 1 or leave it out)", "repetition_penalty")


def check_model(body: dict[str, Any], engine: HFEngine, required: bool = True) -> None:
    """The request's `model` must be the served name (404 otherwise, as OpenAI answers)."""
    model = body.get("model")
    if model is None and not required:
        return
    if not isinstance(model, str):
        raise bad("'model' is required: the served model's name (see GET /v1/models)", "model")
    if model != engine.name:
        raise APIError(
            404,
            f"The model `{model}` does not exist; this server serves `{engine.name}`.",
            param="model",
            code="model_not_found",
        )


def max_tokens_for(prompt_tokens: int, requested: int | None, window: int | None, param: str) -> int:
    """The generation budget: the request's, or what is left of the window; a 400 naming the lengths if over."""
    if window is None:
        if requested is None:
            raise bad("'max_tokens' is required: this model has no known context window", "max_tokens")
        return requested
    if requested is None:
        if prompt_tokens >= window:
            raise bad(
                f"This model's maximum context length is {window} tokens. However, your {param} resulted in "
                f"{prompt_tokens} tokens, leaving none to generate. Please reduce the length of the {param}.",
                param,
                "context_length_exceeded",
            )
        return window - prompt_tokens
    if prompt_tokens + requested > window:
        raise bad(
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt_tokens + requested} tokens ({prompt_tokens} in the {param}, {requested} in the completion). "
            f"Please reduce the length of the {param} or completion.",
            param,
            "context_length_exceeded",
        )
    return requested


def _sampling(body: dict[str, Any], prompt_tokens: int, window: int | None, param: str) -> Sampling:
    requested = _int(body, "max_completion_tokens", 1)
    if requested is None:
        requested = _int(body, "max_tokens", 1)
    return Sampling(
        max_tokens=max_tokens_for(prompt_tokens, requested, window, param),
        temperature=_number(body, "temperature", 0.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 1e-9, 1.0),
        seed=_int(body, "seed", -(2**63), 2**64 - 1),  # torch.manual_seed's range
        stop=_stop(body),
    )


def _stream_flags(body: dict[str, Any]) -> tuple[bool, bool]:
    stream = _bool(body, "stream", False)
    options = body.get("stream_options")
    if options is None:
        return stream, False
    if not isinstance(options, dict):
        raise bad("'stream_options' must be an object like {\"include_usage\": true}", "stream_options")
    if not stream:
        raise bad("'stream_options' is only allowed when 'stream' is true", "stream_options")
    return stream, _bool(options, "include_usage", False)


# -- request bodies ------------------------------------------------------------------------------------------
def messages_of(body: dict[str, Any]) -> list[dict[str, str]]:
    """The conversation as role/content strings (content parts of type text are joined)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad('\'messages\' must be a non-empty list of {"role", "content"} objects', "messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise bad(f"messages[{i}] must be an object with 'role' one of {', '.join(ROLES)}", f"messages[{i}]")
        content = m.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise bad(f"messages[{i}].content: only text parts are supported", f"messages[{i}].content")
            if not all(isinstance(p.get("text", ""), str) for p in content):
                raise bad(f"messages[{i}].content: a text part's 'text' must be a string", f"messages[{i}].content")
            content = "".join(p.get("text", "") for p in content)
        if not isinstance(content, str):
            raise bad(f"messages[{i}].content must be a string or a list of text parts", f"messages[{i}].content")
        out.append({"role": m["role"], "content": content})
    return out


def chat_prompt_ids(body: dict[str, Any], engine: HFEngine, limit: PromptLimit) -> list[int]:
    """Token ids of a chat request's messages (vLLM's add_generation_prompt / continue_final_message honoured)."""
    from jinja2.exceptions import TemplateError

    messages = messages_of(body)
    cont = _bool(body, "continue_final_message", False)
    if cont and messages[-1]["role"] != "assistant":
        raise bad("'continue_final_message' needs the last message to be the assistant's", "continue_final_message")
    check_prompt_size(limit, sum(len(m["content"]) for m in messages), "messages")
    try:
        return engine.chat_ids(messages, _bool(body, "add_generation_prompt", True), cont)
    except ValueError as exc:
        raise bad(str(exc), "messages") from None
    except TemplateError as exc:  # the model's chat template refusing the conversation (e.g. roles out of order)
        raise bad(f"the model's chat template refused 'messages': {exc}", "messages") from None


def token_ids(value: Any, engine: HFEngine, param: str) -> list[int]:
    """`value` as token ids of this vocabulary, or a 400 naming `param` (not a list of ints, an id outside it)."""
    if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        raise bad(f"'{param}' must be a list of token ids (integers)", param)
    vocab = engine.vocab_size()
    bad_ids = [t for t in value if not 0 <= t < vocab]
    if bad_ids:
        raise bad(f"'{param}' token id {bad_ids[0]} is outside the vocabulary (0..{vocab - 1})", param)
    return list(value)


def completion_prompt_ids(body: dict[str, Any], engine: HFEngine, limit: PromptLimit) -> list[int]:
    """Token ids of a completions request's prompt: a string, or the token ids themselves."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        check_prompt_size(limit, len(prompt), "prompt")
        return engine.text_ids(prompt, _bool(body, "add_special_tokens", True))
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return token_ids(prompt, engine, "prompt")
    raise bad("'prompt' must be a string or a list of token ids (one prompt per request)", "prompt")


def parse_generation(
    body: dict[str, Any], engine: HFEngine, kind: Literal["chat", "completion"], limit: PromptLimit
) -> Job:
    """Check a /v1/chat/completions or /v1/completions body into a Job (APIError when it is refused).

    Tokenises the prompt: call it off the event loop (app.py does)."""
    check_model(body, engine)
    _refuse_unsupported(body, kind)
    stream, include_usage = _stream_flags(body)
    echo = _echo_logprobs(body) if kind == "completion" else None
    ids = chat_prompt_ids(body, engine, limit) if kind == "chat" else completion_prompt_ids(body, engine, limit)
    param = "messages" if kind == "chat" else "prompt"
    if not ids:  # nothing to continue from: the model cannot start a reply without a single token
        raise bad(f"'{param}' has no tokens; send at least one token to continue from", param)
    if echo is not None:
        sampling = _echo_sampling(body, len(ids), engine.window)
    else:
        sampling = _sampling(body, len(ids), engine.window, param)
    return Job(kind, ids, sampling, stream, include_usage, echo)


def _echo_logprobs(body: dict[str, Any]) -> int | None:
    """The top tokens per position a completions request asks with `echo: true, logprobs: N` (None without echo);
    `logprobs` without `echo` (the reply's log-probabilities) is refused: only the prompt's are served."""
    echo = _bool(body, "echo", False)
    logprobs = _int(body, "logprobs", 0, MAX_ECHO_LOGPROBS)
    if not echo:
        if logprobs:
            raise bad(
                "'logprobs' without 'echo' is not supported: this server returns the prompt's log-probabilities "
                "(echo=true, max_tokens 0 or 1)",
                "logprobs",
            )
        return None
    if logprobs is None:
        raise bad("'echo' is served with 'logprobs' (the prompt's log-probabilities): send logprobs 0..5", "echo")
    if _bool(body, "stream", False):
        raise bad("'echo' with 'logprobs' is not streamed by this server: send stream=false", "stream")
    return logprobs


def _echo_sampling(body: dict[str, Any], prompt_tokens: int, window: int | None) -> Sampling:
    """An echo request scores its prompt and generates at most one greedy token (lm-eval sends max_tokens 1)."""
    requested = _int(body, "max_tokens", 0, 1)
    if requested is None:
        requested = _int(body, "max_completion_tokens", 0, 1) or 0
    if requested and _number(body, "temperature", 0.0, 0.0, 2.0) >= MIN_SAMPLING_TEMPERATURE:
        raise bad("'echo' with 'max_tokens' 1 generates greedily here: send temperature 0", "temperature")
    if window is not None and prompt_tokens + requested > window:
        max_tokens_for(prompt_tokens, requested, window, "prompt")  # raises context_length_exceeded
    return Sampling(max_tokens=requested)


def tokenize_ids(body: dict[str, Any], engine: HFEngine, limit: PromptLimit) -> list[int]:
    """Token ids for /tokenize: {"prompt"} (special tokens added unless add_special_tokens=false) or {"messages"}."""
    check_model(body, engine, required=False)
    if "messages" in body:
        return chat_prompt_ids(body, engine, limit)
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise bad('/tokenize takes {"prompt": str} or {"messages": [...]}', "prompt")
    check_prompt_size(limit, len(prompt), "prompt")
    return engine.text_ids(prompt, _bool(body, "add_special_tokens", True))


# -- responses -----------------------------------------------------------------------------------------------
def new_id(kind: str) -> str:
    """A fresh response id, `chatcmpl-...` or `cmpl-...`."""
    return f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex}"


def usage(out: Completion) -> dict[str, int]:
    """OpenAI's usage object, prompt tokens counted exactly in the model's tokenizer."""
    return {
        "prompt_tokens": out.prompt_tokens,
        "completion_tokens": out.completion_tokens,
        "total_tokens": out.prompt_tokens + out.completion_tokens,
    }


def response(job: Job, out: Completion, rid: str, created: int, model: str) -> dict[str, Any]:
    """The non-streaming reply."""
    if job.kind == "chat":
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": out.text}}
        obj = "chat.completion"
    else:
        choice, obj = {"index": 0, "text": out.text}, "text_completion"
    choice.update(logprobs=None, finish_reason=out.finish_reason)
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": [choice], "usage": usage(out)}


def echo_response(job: Job, scores: PromptScores, engine: HFEngine, rid: str, created: int) -> dict[str, Any]:
    """The reply to an echo request: the prompt's text (and the one greedy token when asked) with OpenAI's legacy
    `logprobs` object: `tokens`, `token_logprobs` (null for the first), `top_logprobs`, `text_offset`."""
    ids = list(job.ids)
    lps: list[float | None] = [None, *scores.logprobs]
    tops: list[list[tuple[int, float]] | None] = [None, *scores.top]
    finish = "length"
    if job.sampling.max_tokens:
        ids.append(scores.next_id)
        lps.append(scores.next_logprob)
        tops.append(scores.next_top)
        finish = "stop" if scores.next_id in engine.adapter.eos_ids else "length"
    pieces = [engine.hf_tok.decode([t]) for t in ids]
    offsets, at = [], 0
    for piece in pieces:
        offsets.append(at)
        at += len(piece)
    generated = len(ids) - len(job.ids)
    top_logprobs = [None if t is None else {engine.hf_tok.decode([i]): v for i, v in t} for t in tops]
    logprobs = {"tokens": pieces, "token_logprobs": lps, "top_logprobs": top_logprobs, "text_offset": offsets}
    choice = {"index": 0, "text": "".join(pieces), "logprobs": logprobs, "finish_reason": finish}
    out = Completion(prompt_tokens=len(job.ids), completion_tokens=generated)
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": engine.name,
        "choices": [choice],
        "usage": usage(out),
        "cached_tokens": scores.cached_tokens,
    }


def chunk(
    job: Job, rid: str, created: int, model: str, text: str | None, first: bool = False, finish: str | None = None
) -> dict[str, Any]:
    """One streamed chunk: a text delta (the first carries the assistant role), or the closing finish_reason."""
    if job.kind == "chat":
        delta: dict[str, Any] = {"role": "assistant"} if first else {}
        if text is not None:
            delta["content"] = text
        choice: dict[str, Any] = {"index": 0, "delta": delta}
        obj = "chat.completion.chunk"
    else:
        choice, obj = {"index": 0, "text": text or ""}, "text_completion"
    choice.update(logprobs=None, finish_reason=finish)
    out = {"id": rid, "object": obj, "created": created, "model": model, "choices": [choice]}
    if job.include_usage:
        out["usage"] = None
    return out


def usage_chunk(job: Job, rid: str, created: int, model: str, out: Completion) -> dict[str, Any]:
    """The last chunk when stream_options.include_usage is set: no choices, the usage."""
    obj = "chat.completion.chunk" if job.kind == "chat" else "text_completion"
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": [], "usage": usage(out)}


def models_list(engine: HFEngine, created: int) -> dict[str, Any]:
    """GET /v1/models: the one served model, with its context window as vLLM reports it."""
    return {
        "object": "list",
        "data": [
            {
                "id": engine.name,
                "object": "model",
                "created": created,
                "owned_by": "longctx-eval",
                "root": engine.adapter.meta.spec,
                "max_model_len": engine.window,
            }
        ],
    }


def now() -> int:
    """Unix seconds, for `created`."""
    return int(time.time())
