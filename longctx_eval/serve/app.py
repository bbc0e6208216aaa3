"""The aiohttp application of `longctx-eval serve`: OpenAI-compatible routes over one `HFEngine`.

Routes: GET /v1/models, GET /health, POST /v1/chat/completions, POST /v1/completions (both also streamed as
server-sent events, `data: {...}` chunks ending in `data: [DONE]`; completions with `echo: true, logprobs: N`
answer the prompt's log-probabilities: serve/prompt_scoring.py), POST /tokenize and POST /detokenize
(vLLM's shapes). Generation requests wait for the one model in the order their prompts are ready (an asyncio lock
is FIFO).

The event loop only moves bytes: parsing a body, checking it and tokenising its prompt run on a few worker threads
(`PREP`; the tokenizer releases the GIL), and generation on the engine's, so /health and every other route keep
answering, and a short prompt is not queued behind a long one's tokenising. Prompts over `--max-prompt-chars` are
refused (413) before they are tokenised.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from typing import Any, TypeVar

from aiohttp import web

from longctx_eval.serve.engine import Completion, GenerationError, HFEngine
from longctx_eval.serve.json_body import BodyError, parse_json_object
from longctx_eval.serve.prompt_limit import PromptLimit
from longctx_eval.serve.protocol import (
    APIError,
    Job,
    bad,
    check_model,
    chunk,
    echo_response,
    models_list,
    new_id,
    now,
    parse_generation,
    response,
    token_ids,
    tokenize_ids,
    usage_chunk,
)

log = logging.getLogger("longctx_eval.serve")
ENGINE = web.AppKey("engine", HFEngine)
STARTED = web.AppKey("started", int)
LIMIT = web.AppKey("limit", PromptLimit)
PREP = web.AppKey("prep", ThreadPoolExecutor)
PREP_THREADS = 4
"""Requests parsed and tokenised at once; each prompt is at most --max-prompt-chars, so memory stays bounded."""
MAX_BODY_BYTES = 64 * 1024 * 1024
T = TypeVar("T")


def error_response(exc: APIError) -> web.Response:
    """An APIError as OpenAI's JSON error body with its status."""
    return web.json_response(exc.body(), status=exc.status)


async def off_loop(request: web.Request, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a preparation thread: CPU work (parsing, tokenising) never blocks the event loop."""
    return await asyncio.get_running_loop().run_in_executor(request.app[PREP], functools.partial(fn, *args))


def _parse_body(raw: bytes) -> dict[str, Any]:
    try:
        return parse_json_object(raw)
    except BodyError as exc:
        raise bad(str(exc)) from None


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise APIError(
            413, f"the request body is over this server's limit of {MAX_BODY_BYTES:,} bytes (64 MiB)"
        ) from None
    return await off_loop(request, _parse_body, raw)


@web.middleware
async def openai_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """Every refusal and failure leaves as OpenAI's JSON error shape (unknown routes too)."""
    try:
        return await handler(request)
    except APIError as exc:
        return error_response(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kind = "invalid_request_error" if exc.status < 500 else "server_error"
        return error_response(APIError(exc.status, f"{request.method} {request.path}: {exc.reason}", type=kind))
    except GenerationError as exc:
        log.exception("generation failed")
        return error_response(APIError(500, str(exc), type="server_error"))
    except Exception as exc:  # a bug must still answer in OpenAI's shape (and the engine stays usable: engine.py)
        log.exception("%s %s failed", request.method, request.path)
        return error_response(APIError(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error"))


async def list_models(request: web.Request) -> web.Response:
    """GET /v1/models."""
    return web.json_response(models_list(request.app[ENGINE], request.app[STARTED]))


async def health(request: web.Request) -> web.Response:
    """GET /health: 200 once the model is loaded (it is loaded before the server listens)."""
    return web.Response(text="ok")


async def tokenize(request: web.Request) -> web.Response:
    """POST /tokenize: {"prompt"} or {"messages"} -> {"tokens", "count", "max_model_len"} (vLLM's shape)."""
    engine = request.app[ENGINE]
    ids = await off_loop(request, tokenize_ids, await _json_body(request), engine, request.app[LIMIT])
    return web.json_response({"tokens": ids, "count": len(ids), "max_model_len": engine.window})


async def detokenize(request: web.Request) -> web.Response:
    """POST /detokenize: {"tokens": [...]} -> {"prompt": text} (vLLM's shape)."""
    engine = request.app[ENGINE]
    body = await _json_body(request)
    check_model(body, engine, required=False)
    return web.json_response({"prompt": await off_loop(request, _detokenize, body, engine)})


def _detokenize(body: dict[str, Any], engine: HFEngine) -> str:
    tokens = token_ids(body.get("tokens"), engine, "tokens")  # ids outside the vocabulary are a 400, not a 500
    return engine.hf_tok.decode(tokens)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions."""
    return await _generate(request, "chat")


async def completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/completions."""
    return await _generate(request, "completion")


async def _generate(request: web.Request, kind: Any) -> web.StreamResponse:
    engine = request.app[ENGINE]
    job = await off_loop(request, parse_generation, await _json_body(request), engine, kind, request.app[LIMIT])
    rid, created = new_id(kind), now()
    out = Completion(prompt_tokens=len(job.ids))
    t0 = time.perf_counter()
    async with engine.lock:
        waited = time.perf_counter() - t0
        if job.echo_logprobs is not None:  # the prompt scored, at most one greedy token (prompt_scoring.py)
            loop = asyncio.get_running_loop()
            scores = await loop.run_in_executor(None, engine.scorer.score, job.ids, job.echo_logprobs)
            reply = echo_response(job, scores, engine, rid, created)
            out.completion_tokens, out.finish_reason = reply["usage"]["completion_tokens"], "echo"
            resp: web.StreamResponse = web.json_response(reply)
        elif job.stream:
            resp = await _stream(request, engine, job, out, rid, created)
        else:
            async with aclosing(engine.stream(job.ids, job.sampling, out)) as pieces:
                async for _ in pieces:
                    pass
            resp = web.json_response(response(job, out, rid, created, engine.name))
    log.info(
        "%s %s prompt=%d completion=%d finish=%s queued=%.3fs total=%.3fs",
        request.method,
        request.path,
        out.prompt_tokens,
        out.completion_tokens,
        out.finish_reason,
        waited,
        time.perf_counter() - t0,
    )
    return resp


async def _stream(
    request: web.Request, engine: HFEngine, job: Job, out: Completion, rid: str, created: int
) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)

    async def send(obj: Any) -> None:
        await resp.write(f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode())

    first = True
    try:
        async with aclosing(engine.stream(job.ids, job.sampling, out)) as pieces:
            async for text in pieces:
                if text or first:  # the first chunk goes out with the first token, so its arrival is the TTFT
                    await send(chunk(job, rid, created, engine.name, text, first=first))
                    first = False
        await send(chunk(job, rid, created, engine.name, None if job.kind == "chat" else "", finish=out.finish_reason))
        if job.include_usage:
            await send(usage_chunk(job, rid, created, engine.name, out))
    except ConnectionError as exc:  # the client went away: generation was stopped
        log.info("client disconnected mid-stream: %s", exc)
        return resp
    except Exception as exc:  # GenerationError or a bug: the stream ends with an OpenAI-shaped error event
        log.exception("generation failed mid-stream")
        message = str(exc) if isinstance(exc, GenerationError) else f"internal error: {type(exc).__name__}: {exc}"
        await send(APIError(500, message, type="server_error").body())
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def build_app(engine: HFEngine, max_prompt_chars: int | None = None) -> web.Application:
    """The server application over a loaded engine; `max_prompt_chars` None is PromptLimit's default for its window."""
    app = web.Application(middlewares=[openai_errors], client_max_size=MAX_BODY_BYTES)
    app[ENGINE] = engine
    app[STARTED] = now()
    app[LIMIT] = PromptLimit.for_window(engine.window, max_prompt_chars)
    app[PREP] = ThreadPoolExecutor(max_workers=PREP_THREADS, thread_name_prefix="serve-prep")
    app.on_cleanup.append(_stop_prep)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/health", health)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    return app


async def _stop_prep(app: web.Application) -> None:
    app[PREP].shutdown(wait=False, cancel_futures=True)
