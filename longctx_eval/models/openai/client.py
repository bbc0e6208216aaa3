"""The async client of an OpenAI-compatible endpoint (vLLM, SGLang, llama.cpp, `longctx-eval serve`, hosted APIs).

Built on the official `openai` package with its own retries off: this client bounds requests in flight, keeps
strict requests/tokens-per-minute windows, times out each attempt, and retries 429 (honouring Retry-After), 5xx,
timeouts, connection errors, broken streams and invalid JSON with capped, seeded exponential backoff, up to a
hard cap on attempts. A request that finally fails comes back as a `ServedResult` with `error` set (never an
exception, never dropped). Streaming replies are timed chunk by chunk: time to first token, inter-token gaps,
end-to-end latency. The API key is read from an environment variable and appears in no repr, result or message.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from longctx_eval.errors import ConfigError, PrerequisiteError
from longctx_eval.models.openai.limits import ClientLimits, RateLimiter, backoff_s, retry_after_s
from longctx_eval.models.openai.server_facts import ServerFacts, combined, facts_of_props, window_of_models

__all__ = ["ClientLimits", "ServedClient", "ServedRequest", "ServedResult", "RETRY_REASONS"]

PLACEHOLDER_KEY = "EMPTY"
"""Sent when the key variable is unset (local servers need no key; the openai client refuses an empty one)."""
RETRY_REASONS = ("429", "5xx", "timeout", "connection", "broken_stream", "invalid_json")
"""Why an attempt is retried: rate limited, server error, timed out, refused/reset before any reply, reply stream
cut short (no finish reason) or reset mid-way, reply that is not valid JSON."""
KEYED_HOSTS = ("api.openai.com",)
"""Hosts that always need a key: a missing variable is an error before anything is sent."""
ITL_KEPT = 4096
"""Inter-token gaps kept per request in `stats()` (a long reasoning trace would otherwise bloat records)."""
_SECRETISH = (
    re.compile(r"\b(sk-)[A-Za-z0-9_\-*.]{6,}"),
    re.compile(r"(?i)\b(bearer\s+)\S+"),
)


@dataclass(frozen=True)
class ServedRequest:
    """One request: chat `messages` or a completions `prompt` (exactly one), with its generation budget."""

    messages: tuple[Mapping[str, str], ...] | None = None
    prompt: str | None = None
    max_tokens: int = 32
    id: str = ""
    """Names the request in jitter seeding and results (e.g. the prediction key)."""
    temperature: float | None = 0.0
    """0: greedy. None: not sent (servers or hosted reasoning models that refuse it use their default)."""
    seed: int | None = 0
    sampling: Mapping[str, float] = field(default_factory=dict)
    """Further OpenAI API generation fields (top_p, presence_penalty, frequency_penalty), sent as given."""
    stream: bool = True
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    reasoning_effort: str | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    """Server-specific fields (vLLM: continue_final_message, add_generation_prompt, chat_template_kwargs)."""
    prompt_tokens: int | None = None
    """Expected prompt tokens, for the tokens-per-minute window (else estimated as characters / 4)."""
    affinity: str | None = None
    """Names the document the request reads: with several servers, requests of one document go to one server."""
    prompt_ids: tuple[int, ...] | None = None
    """Completions only: the prompt sent as these token ids (`prompt` then only names it for limits and logs)."""
    echo_logprobs: int | None = None
    """Completions only: send `echo: true, logprobs: N`, so the reply carries the prompt's log-probabilities."""

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("ServedRequest needs exactly one of messages (chat) or prompt (completions)")
        if self.max_tokens < 1:
            raise ValueError(f"ServedRequest.max_tokens={self.max_tokens}; expected a positive integer")

    @property
    def endpoint(self) -> Literal["chat", "completions"]:
        """`chat` for messages, `completions` for a prompt."""
        return "chat" if self.messages is not None else "completions"

    def budget_tokens(self) -> int:
        """Tokens this request may use: expected prompt tokens plus the generation budget."""
        if self.prompt_tokens is not None:
            prompt = self.prompt_tokens
        else:
            contents = (m.get("content", "") for m in self.messages or ())
            text = self.prompt if self.prompt is not None else "".join(contents)
            prompt = len(text) // 4 + 1
        return prompt + self.max_tokens


@dataclass
class ServedResult:
    """What one request produced: reply, usage, timings, attempts and retries, or the reason it failed."""

    id: str = ""
    text: str = ""
    """The reply as the server sent it (content; reasoning tags such as <think> are left in)."""
    reasoning: str | None = None
    """Reasoning the server sent apart (`reasoning_content` / `reasoning` fields), None when there was none."""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    """prompt_tokens, completion_tokens (and reasoning_tokens when reported); None when the server sent none."""
    ttft_s: float | None = None
    """Seconds from sending the final attempt to its first token (None when not streamed or nothing came)."""
    itl_s: list[float] = field(default_factory=list)
    """Gaps between successive token-bearing chunks of the final attempt."""
    e2e_s: float | None = None
    """Seconds from sending the final attempt to its last byte (last-token latency)."""
    started: float = 0.0
    """Unix time the final attempt was sent."""
    finished: float = 0.0
    """Unix time the final attempt ended."""
    chunks: int = 0
    """Token-bearing chunks received in the final attempt."""
    attempts: int = 0
    retries_by_reason: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    """None when the request succeeded, else why it finally failed (one line, no key)."""
    error_kind: str | None = None
    """The failure's reason class: one of RETRY_REASONS, `http_<status>`, `limit` or `client`."""
    server: str | None = None
    """The base URL that answered, when the model has several servers (models/openai/pool.py)."""
    logprobs: dict[str, Any] | None = None
    """The choice's `logprobs` object as the server sent it (echo requests: the prompt's; OpenAI's legacy shape)."""

    @property
    def ok(self) -> bool:
        """Whether the request succeeded."""
        return self.error is None

    @property
    def prompt_tokens(self) -> int | None:
        """Prompt tokens the server reported."""
        return (self.usage or {}).get("prompt_tokens")

    @property
    def completion_tokens(self) -> int | None:
        """Generated tokens the server reported (reasoning included), else token-bearing chunks counted."""
        reported = (self.usage or {}).get("completion_tokens")
        return reported if reported is not None else (self.chunks if self.ok else None)

    @property
    def retries(self) -> int:
        """Attempts beyond the first."""
        return sum(self.retries_by_reason.values())

    @property
    def output_tokens_per_s(self) -> float | None:
        """Generated tokens over end-to-end seconds."""
        n = self.completion_tokens
        return n / self.e2e_s if n and self.e2e_s else None

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (e2e - ttft) / (tokens - 1)."""
        n = self.completion_tokens
        if n is None or n < 2 or self.ttft_s is None or self.e2e_s is None:
            return None
        return max(self.e2e_s - self.ttft_s, 0.0) / (n - 1)

    def stats(self) -> dict[str, Any]:
        """The JSON record of this result's serving figures (what a prediction keeps under data['serving'])."""
        rec: dict[str, Any] = {
            "ok": self.ok,
            "attempts": self.attempts,
            "retries_by_reason": dict(sorted(self.retries_by_reason.items())),
            "started": round(self.started, 6),
            "finished": round(self.finished, 6),
            "ttft_s": _r(self.ttft_s),
            "e2e_s": _r(self.e2e_s),
            "itl_s": [_r(x) for x in self.itl_s[:ITL_KEPT]],
            "itl_count": len(self.itl_s),
            "chunks": self.chunks,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "usage_reported": self.usage is not None,
            "finish_reason": self.finish_reason,
        }
        if self.usage and "reasoning_tokens" in self.usage:
            rec["reasoning_tokens"] = self.usage["reasoning_tokens"]
        if self.error is not None:
            rec["error_kind"] = self.error_kind
        if self.server is not None:
            rec["server"] = self.server
        return rec


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def is_loopback(base_url: str) -> bool:
    """Whether the URL's host is this machine."""
    host = (urlsplit(base_url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def server_root(base_url: str) -> str:
    """The server root of an API base URL: `http://h:8000/v1` -> `http://h:8000` (where vLLM serves /tokenize)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class _Failure(Exception):
    """An attempt that failed: its reason class, whether to retry, and a server-requested wait."""

    def __init__(self, kind: str, message: str, retry: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry = retry
        self.retry_after = retry_after


@dataclass
class _Attempt:
    """What one attempt has received so far."""

    t0: float = 0.0
    started: float = 0.0
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    token_times: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    received: bool = False
    logprobs: dict[str, Any] | None = None


class ServedClient:
    """An OpenAI-compatible endpoint behind client-side limits; safe to share across concurrent tasks."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        limits: ClientLimits | None = None,
        *,
        limiter: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        scheme = urlsplit(base_url).scheme
        if scheme not in ("http", "https") or not urlsplit(base_url).hostname:
            raise ConfigError(f"base URL {base_url!r}: expected http(s)://host[:port]/v1")
        if urlsplit(base_url).username or urlsplit(base_url).password:
            raise ConfigError("base URL holds credentials; put the key in an environment variable (api_key_env)")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.limits = limits or ClientLimits()
        key = os.environ.get(api_key_env) or ""
        host = (urlsplit(base_url).hostname or "").lower()
        if not key and host in KEYED_HOSTS:
            raise ConfigError(f"{host} needs an API key: set the environment variable ${api_key_env}")
        self.key_given = bool(key)
        self._key = key or PLACEHOLDER_KEY
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._api: Any = None
        self._slots: asyncio.Semaphore | None = None
        self.limiter = limiter or RateLimiter(self.limits.rpm, self.limits.tpm, clock=clock)
        """Shared by every request of this client; may be replaced (one limiter across several clients)."""
        self._ids = 0

    def __repr__(self) -> str:
        return f"ServedClient({self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    # --- loop-bound state ---------------------------------------------------------------------------------

    def _bind(self) -> None:
        """Build the HTTP client, slots and limiter lock for the running event loop (again if it changed)."""
        loop = asyncio.get_running_loop()
        if loop is self._loop and self._api is not None:
            return
        try:
            from openai import AsyncOpenAI
        except ImportError as exc:
            raise PrerequisiteError("the openai: adapter needs `pip install openai` (a project dependency)") from exc
        self._loop = loop
        self._api = AsyncOpenAI(
            api_key=self._key,
            base_url=self.base_url,
            max_retries=0,  # retries are ours: counted, seeded, capped
            timeout=self.limits.timeout_s,
        )
        self._slots = asyncio.Semaphore(self.limits.max_in_flight)
        self.limiter._lock = None

    def scrub(self, text: str) -> str:
        """`text` with the API key and anything key- or bearer-token-like masked."""
        if len(self._key) >= 4 and self._key != PLACEHOLDER_KEY:
            text = text.replace(self._key, "***")
        for pattern in _SECRETISH:
            text = pattern.sub(lambda m: m.group(1) + "***", text)
        return text

    # --- requests -----------------------------------------------------------------------------------------

    async def complete(self, req: ServedRequest) -> ServedResult:
        """Send one request (waiting for a free slot and the rate windows), retrying as the limits say."""
        self._bind()
        assert self._slots is not None
        async with self._slots:
            return await self._complete(req)

    async def complete_many(
        self, reqs: Sequence[ServedRequest], on_result: Callable[[int, ServedResult], None] | None = None
    ) -> list[ServedResult]:
        """Send requests in the order given, at most `max_in_flight` at once; results in the same order.

        Request i is sent no later than request i+1 (a slot is taken before the next is dispatched), so
        requests sharing a prefix that arrive back to back are sent back to back and hit server prefix caches.
        """
        self._bind()
        assert self._slots is not None
        slots = self._slots
        out: list[ServedResult | None] = [None] * len(reqs)

        async def run(i: int, req: ServedRequest) -> None:
            try:
                out[i] = result = await self._complete(req)
                if on_result is not None:
                    on_result(i, result)
            finally:
                slots.release()

        tasks = []
        try:
            for i, req in enumerate(reqs):
                await slots.acquire()
                tasks.append(asyncio.create_task(run(i, req)))
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
        return [r for r in out if r is not None]

    async def _complete(self, req: ServedRequest) -> ServedResult:
        self._ids += 1
        rid = req.id or f"req{self._ids}"
        budget = req.budget_tokens()
        result = ServedResult(id=rid)
        retries: Counter[str] = Counter()
        never = self.limiter.check(budget)
        if never:
            return self._failed(result, retries, 0, "limit", never)
        for attempt in range(1, self.limits.max_attempts + 1):
            entry = await self.limiter.acquire(budget)
            got = _Attempt()
            try:
                async with asyncio.timeout(self.limits.timeout_s):
                    await self._attempt(req, got)
            except Exception as exc:  # every failure is classified and recorded; cancellation still propagates
                fail = self._classify(exc, got)
                if not fail.retry or attempt == self.limits.max_attempts:  # the last reason is the failure
                    return self._failed(result, retries, attempt, fail.kind, str(fail), got)
                retries[fail.kind] += 1
                await asyncio.sleep(backoff_s(self.limits, rid, attempt, fail.retry_after))
                continue
            self.limiter.settle(entry, _used(got.usage, budget))
            return self._finish(result, retries, attempt, got)
        raise AssertionError("unreachable")  # pragma: no cover

    def _failed(
        self, result: ServedResult, retries: Counter[str], attempts: int, kind: str, message: str, got: Any = None
    ) -> ServedResult:
        result.attempts = attempts
        result.retries_by_reason = {k: v for k, v in sorted(retries.items()) if v}
        result.error_kind = kind
        tries = f" after {attempts} attempt(s)" if attempts > 1 else ""
        result.error = self.scrub(f"{kind}{tries}: {message}")[:500]
        if got is not None and got.started:
            result.started = got.started
            result.finished = time.time()
        return result

    def _finish(self, result: ServedResult, retries: Counter[str], attempts: int, got: _Attempt) -> ServedResult:
        end = time.perf_counter()
        times = got.token_times
        result.text = "".join(got.text)
        result.reasoning = "".join(got.reasoning) if got.reasoning else None
        result.finish_reason = got.finish_reason
        result.usage = got.usage
        result.logprobs = got.logprobs
        result.ttft_s = times[0] - got.t0 if times else None
        result.itl_s = [b - a for a, b in zip(times, times[1:], strict=False)]
        result.e2e_s = end - got.t0
        result.started = got.started
        result.finished = got.started + result.e2e_s
        result.chunks = len(times)
        result.attempts = attempts
        result.retries_by_reason = {k: v for k, v in sorted(retries.items()) if v}
        return result

    def _body(self, req: ServedRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, req.max_tokens_param: req.max_tokens}
        if req.messages is not None:
            body["messages"] = [dict(m) for m in req.messages]
            if req.reasoning_effort is not None:
                body["reasoning_effort"] = req.reasoning_effort
        else:
            body["prompt"] = list(req.prompt_ids) if req.prompt_ids is not None else req.prompt
            if req.echo_logprobs is not None:
                body["echo"], body["logprobs"] = True, req.echo_logprobs
        if req.temperature is not None:
            body["temperature"] = req.temperature
        if req.seed is not None:
            body["seed"] = req.seed
        body.update(req.sampling)
        if req.extra_body:
            body["extra_body"] = dict(req.extra_body)
        return body

    async def _attempt(self, req: ServedRequest, got: _Attempt) -> None:
        """One attempt, filling `got` as the reply arrives; raises on any failure."""
        api = self._api
        resource = api.chat.completions if req.endpoint == "chat" else api.completions
        body = self._body(req)
        got.started = time.time()
        got.t0 = time.perf_counter()
        if not req.stream:
            reply = await resource.create(**body)
            got.received = True
            for choice in getattr(reply, "choices", None) or []:
                if req.endpoint == "chat":
                    msg = choice.message
                    got.text.append(getattr(msg, "content", None) or "")
                    reasoning = _reasoning_of(msg)
                    if reasoning:
                        got.reasoning.append(reasoning)
                else:
                    got.text.append(getattr(choice, "text", None) or "")
                    got.logprobs = _logprobs_of(choice)
                got.finish_reason = getattr(choice, "finish_reason", None)
                break
            got.usage = _usage(getattr(reply, "usage", None))
            if got.finish_reason is None:
                raise _Failure("invalid_json", "reply has no choice with a finish reason", retry=True)
            return
        stream = await resource.create(**body, stream=True, stream_options={"include_usage": True})
        try:
            await self._read_stream(req, stream, got)
        finally:
            await stream.close()
        if got.finish_reason is None:
            raise _Failure("broken_stream", "the reply stream ended before a finish reason", retry=True)

    @staticmethod
    async def _read_stream(req: ServedRequest, stream: Any, got: _Attempt) -> None:
        """Collect a streamed reply's text, reasoning, token times, finish reason and usage into `got`."""
        async for chunk in stream:
            got.received = True
            usage = _usage(getattr(chunk, "usage", None))
            if usage is not None:
                got.usage = usage
            for choice in getattr(chunk, "choices", None) or []:
                if req.endpoint == "chat":
                    delta = getattr(choice, "delta", None)
                    piece = (getattr(delta, "content", None) or "") if delta is not None else ""
                    reasoning = _reasoning_of(delta) if delta is not None else None
                else:
                    piece, reasoning = getattr(choice, "text", None) or "", None
                if piece or reasoning:
                    got.token_times.append(time.perf_counter())
                    got.text.append(piece)
                    if reasoning:
                        got.reasoning.append(reasoning)
                if getattr(choice, "finish_reason", None):
                    got.finish_reason = choice.finish_reason

    def _classify(self, exc: Exception, got: _Attempt) -> _Failure:
        """The reason class of a failed attempt and whether it is retried."""
        if isinstance(exc, _Failure):
            return exc
        import openai

        if isinstance(exc, TimeoutError | openai.APITimeoutError):
            return _Failure("timeout", f"no complete reply within {self.limits.timeout_s:g} s", retry=True)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            wait = retry_after_s(dict(exc.response.headers)) if exc.response is not None else None
            message = f"HTTP {status}: {_server_message(exc)}"
            if status == 429:
                return _Failure("429", message, retry=True, retry_after=wait)
            if status >= 500:
                return _Failure("5xx", message, retry=True, retry_after=wait)
            if status == 408:
                return _Failure("timeout", message, retry=True, retry_after=wait)
            hint = f" (is ${self.api_key_env} right?)" if status in (401, 403) else ""
            return _Failure(f"http_{status}", message + hint, retry=False)
        if isinstance(exc, openai.APIConnectionError):
            if got.received:
                return _Failure("broken_stream", f"the reply stream broke off: {_cause(exc)}", retry=True)
            return _Failure("connection", f"{exc}: {_cause(exc)}", retry=True)
        if isinstance(exc, ValueError | openai.APIResponseValidationError):  # json.JSONDecodeError included
            return _Failure("invalid_json", f"the reply is not valid JSON: {str(exc)[:200]}", retry=True)
        if isinstance(exc, openai.APIError):  # an error event inside the stream: the server failed mid-reply
            return _Failure("5xx", f"the server sent an error in the stream: {_server_message(exc)}", retry=True)
        return _Failure("client", f"{type(exc).__name__}: {str(exc)[:200]}", retry=False)

    # --- server facts -------------------------------------------------------------------------------------

    async def models(self) -> list[dict[str, Any]]:
        """The server's /v1/models entries (raw JSON objects); one attempt, errors raise."""
        self._bind()
        data = await self._api.get(f"{self.base_url}/models", cast_to=object)
        items = data.get("data") if isinstance(data, dict) else None
        return [m for m in items or [] if isinstance(m, dict)]

    async def context_window(self) -> int | None:
        """The served model's context window as the server reports it (vLLM: `max_model_len`), else None."""
        return (await self.server_facts()).window

    async def props(self) -> dict[str, Any]:
        """llama.cpp's GET {root}/props (its window per slot and slot count); {} where the server has none."""
        import openai

        self._bind()
        try:
            data = await self._api.get(f"{server_root(self.base_url)}/props", cast_to=object)
        except (openai.APIStatusError, ValueError):  # 404 (vLLM, llama-cpp-python, hosted APIs), 401, not JSON
            return {}
        return data if isinstance(data, dict) else {}

    async def server_facts(self, props: bool = True) -> ServerFacts:
        """The window (/v1/models, else /props) and the slots (/props) the server reports; /v1/models errors raise.
        `props=False` (hosted APIs) asks /v1/models only."""
        listed = window_of_models(await self.models(), self.model)
        return combined(listed, facts_of_props(await self.props() if props else {}))

    async def tokenize(
        self, *, prompt: str | None = None, messages: Sequence[Mapping[str, str]] | None = None, **fields: Any
    ) -> int | None:
        """Prompt tokens as the server counts them: vLLM's POST {root}/tokenize (prompt or messages, plus
        `fields` such as add_generation_prompt), else llama.cpp's POST /extras/tokenize (prompt only);
        None when the server has neither."""
        import openai

        self._bind()
        root = server_root(self.base_url)
        body: dict[str, Any] = {"model": self.model, **fields}
        if messages is not None:
            body["messages"] = [dict(m) for m in messages]
        else:
            body["prompt"] = prompt
        try:
            data = await self._api.post(f"{root}/tokenize", cast_to=object, body=body)
            if isinstance(data, dict):
                if isinstance(data.get("count"), int):
                    return data["count"]
                if isinstance(data.get("tokens"), list):
                    return len(data["tokens"])
        except openai.NotFoundError:
            pass
        if messages is not None:
            return None
        try:
            data = await self._api.post(f"{root}/extras/tokenize", cast_to=object, body={"input": prompt})
        except openai.NotFoundError:
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._api is not None:
            await self._api.close()
            self._api = None


def _reasoning_of(obj: Any) -> str | None:
    for name in ("reasoning_content", "reasoning"):
        value = getattr(obj, name, None)
        if value is None:
            extra = getattr(obj, "model_extra", None) or {}
            value = extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _logprobs_of(choice: Any) -> dict[str, Any] | None:
    """A completions choice's `logprobs` object as plain JSON (None when the server sent none)."""
    value = getattr(choice, "logprobs", None)
    if value is None:
        return None
    dumped = value.model_dump() if hasattr(value, "model_dump") else value
    return dumped if isinstance(dumped, dict) else None


def _usage(usage: Any) -> dict[str, int] | None:
    if usage is None:
        return None
    out: dict[str, int] = {}
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = getattr(usage, name, None)
        if isinstance(value, int):
            out[name] = value
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = getattr(details, "reasoning_tokens", None) if details is not None else None
    if isinstance(reasoning, int):
        out["reasoning_tokens"] = reasoning
    return out or None


def _used(usage: dict[str, int] | None, budget: int) -> int:
    if not usage or "prompt_tokens" not in usage:
        return budget
    return usage["prompt_tokens"] + usage.get("completion_tokens", 0)


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return str(msg)[:300]
        return json.dumps(body)[:300]
    return str(getattr(exc, "message", exc))[:300]


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{type(cause).__name__}: {cause}"[:200] if cause else type(exc).__name__
