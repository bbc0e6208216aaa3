"""A loopback proxy that injects faults between an OpenAI-style client and its server, on a seeded schedule.

Only generation requests (POST .../completions) are subject to the schedule; everything else (/v1/models,
/tokenize, and a generation request whose body is not a JSON object: the upstream answers it as it would
without the proxy) passes through. The proxy's own answers are JSON too (a body over 64 MiB: 413). What it
injected is counted: GET /fault-stats returns the counts and the per-request log, DELETE /fault-stats starts the
schedule and the counts afresh.

    proxy = FaultProxy("http://127.0.0.1:8000", seed=0, schedule="429=0.2,drop=0.1")
    with proxy.start() as server:        # a background thread; server.url is http://127.0.0.1:PORT
        ...                              # point the client at server.url + "/v1"
    proxy.stats()                        # {"requests": n, "injected": {...}, "ok": m, "log": [...]}
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from typing import Any

import aiohttp
from aiohttp import web

from longctx_eval.serve.fault_schedule import DEFAULT_SCHEDULE, FAULTS, FaultSchedule, parse_schedule
from longctx_eval.serve.json_body import BodyError, parse_json_object
from longctx_eval.serve.listen import BackgroundServer

log = logging.getLogger("longctx_eval.fault_proxy")
MAX_BODY_BYTES = 64 * 1024 * 1024
HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding", "keep-alive"}


class FaultProxy:
    """Forwards to `upstream` (a server root, e.g. http://127.0.0.1:8000; a trailing /v1 is dropped)."""

    def __init__(
        self,
        upstream: str,
        seed: int = 0,
        schedule: str | FaultSchedule = DEFAULT_SCHEDULE,
        retry_after_s: float = 1.0,
        slow_delay_s: float = 0.2,
        drop_after_events: int = 1,
    ) -> None:
        root = upstream.rstrip("/")
        self.upstream = root[: -len("/v1")] if root.endswith("/v1") else root
        self.schedule = schedule if isinstance(schedule, FaultSchedule) else parse_schedule(schedule, seed)
        self.retry_after_s = retry_after_s
        self.slow_delay_s = slow_delay_s
        self.drop_after_events = drop_after_events
        self._lock = threading.Lock()
        self._session: aiohttp.ClientSession | None = None
        self.reset()

    # -- counts --------------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Start the schedule again at request 0 and zero the counts."""
        with self._lock:
            self._next = 0
            self._passed = 0
            self._injected = dict.fromkeys(FAULTS, 0)
            self._ok = 0
            self._log: list[dict[str, Any]] = []

    def _take(self, path: str, stream: bool) -> tuple[int, str]:
        with self._lock:
            i = self._next
            self._next += 1
            fault = self.schedule.fault(i)
            if fault == "ok":
                self._ok += 1
            else:
                self._injected[fault] += 1
            self._log.append({"i": i, "path": path, "stream": stream, "fault": fault})
            return i, fault

    def stats(self) -> dict[str, Any]:
        """Requests scheduled, faults injected by kind, untouched ones, passed-through others, the per-request log."""
        with self._lock:
            return {
                "requests": self._next,
                "injected": dict(self._injected),
                "injected_total": sum(self._injected.values()),
                "ok": self._ok,
                "passed_through": self._passed,
                "seed": self.schedule.seed,
                "log": [dict(e) for e in self._log],
            }

    # -- serving -------------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        """The aiohttp application (one upstream session, opened on startup)."""
        app = web.Application(middlewares=[_json_errors], client_max_size=MAX_BODY_BYTES)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        app.router.add_route("GET", "/fault-stats", self._stats)
        app.router.add_route("DELETE", "/fault-stats", self._reset)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    def start(self, host: str = "127.0.0.1", port: int = 0) -> BackgroundServer:
        """Serve from a background thread; the returned server's `url` is the proxy's root."""
        return BackgroundServer(self.app(), host, port)

    async def _open(self, app: web.Application) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))

    async def _close(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response(self.stats())

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        generation = request.method == "POST" and request.path.rstrip("/").endswith("completions")
        stream = await asyncio.to_thread(_stream_flag, body) if generation else None
        if stream is None:  # not a generation request, or a malformed one: the upstream answers it untouched
            with self._lock:
                self._passed += 1
            return await self._forward(request, body, "ok")
        i, fault = self._take(request.path, stream)
        if fault == "429":
            return _error(429, f"rate limit reached (fault injected into request {i})", "rate_limit_exceeded", self)
        if fault == "500":
            return _error(500, f"internal server error (fault injected into request {i})", "server_error", None)
        return await self._forward(request, body, fault)

    async def _forward(self, request: web.Request, body: bytes, fault: str) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        try:
            upstream = await self._session.request(
                request.method, self.upstream + request.path_qs, headers=headers, data=body or None
            )
        except aiohttp.ClientError as exc:
            return _error(502, f"fault proxy: upstream {self.upstream} unreachable: {exc}", "bad_gateway", None)
        async with upstream:
            if upstream.content_type == "text/event-stream":
                return await self._relay_stream(request, upstream, fault)
            data = await upstream.read()
            if fault == "slow":
                await asyncio.sleep(self.slow_delay_s)
            if fault == "truncate":
                data = data[: len(data) // 2]
            keep = {k: v for k, v in upstream.headers.items() if k.lower() in ("content-type", "retry-after")}
            if fault != "drop":
                return web.Response(body=data, status=upstream.status, headers=keep)
            resp = web.StreamResponse(status=upstream.status, headers=keep)
            resp.content_length = len(data)  # promise the whole body, send half, hang up
            await resp.prepare(request)
            await resp.write(data[: len(data) // 2])
            return _hang_up(request, resp)

    async def _relay_stream(
        self, request: web.Request, upstream: aiohttp.ClientResponse, fault: str
    ) -> web.StreamResponse:
        resp = web.StreamResponse(status=upstream.status, headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sent = 0
        try:
            async for event in _sse_events(upstream):
                done = event.strip() == b"data: [DONE]"
                if fault == "drop" and (sent >= self.drop_after_events or done):
                    return _hang_up(request, resp)
                if fault == "slow" and sent:
                    await asyncio.sleep(self.slow_delay_s)
                if fault == "truncate":  # half of the first event's JSON, then a clean end of stream
                    await resp.write(event[: len(event) // 2] + b"\n\n")
                    break
                await resp.write(event)
                sent += 1
            await resp.write_eof()
        except ConnectionError:  # the client gave up (e.g. its timeout on a slow stream); upstream is closed
            pass
        return resp


def _stream_flag(body: bytes) -> bool | None:
    """Whether a generation request asks for a stream; None when its body is not a JSON object (any malformation)."""
    try:
        return bool(parse_json_object(body).get("stream"))
    except BodyError:
        return None


@web.middleware
async def _json_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """The proxy's own refusals and failures leave as OpenAI-shaped JSON, never aiohttp's plain-text pages."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 413:
            message = f"fault proxy: the request body is over its limit of {MAX_BODY_BYTES:,} bytes (64 MiB)"
        else:
            message = f"fault proxy: {request.method} {request.path}: {exc.reason}"
        code = "invalid_request_error" if exc.status < 500 else "server_error"
        return _error(exc.status, message, code, None)
    except Exception as exc:  # a bug in the proxy must still answer in OpenAI's shape
        log.exception("fault proxy: %s %s failed", request.method, request.path)
        return _error(500, f"fault proxy: internal error: {type(exc).__name__}: {exc}", "server_error", None)


async def _sse_events(upstream: aiohttp.ClientResponse) -> Any:
    """The upstream stream split into events (each ending in a blank line, kept)."""
    buf = b""
    async for line in upstream.content:
        buf += line
        if line in (b"\n", b"\r\n"):
            yield buf
            buf = b""
    if buf.strip():
        yield buf


def _hang_up(request: web.Request, resp: web.StreamResponse) -> web.StreamResponse:
    """Close the connection mid-response (the client sees an incomplete body)."""
    if request.transport is not None:
        request.transport.abort()
    return resp


def _error(status: int, message: str, code: str, proxy: FaultProxy | None) -> web.Response:
    body = {"error": {"message": message, "type": code, "param": None, "code": code}}
    headers = {}
    if proxy is not None:  # a 429 says when to come back, in seconds (and milliseconds, as OpenAI sends)
        headers["Retry-After"] = str(max(0, math.ceil(proxy.retry_after_s)))
        headers["retry-after-ms"] = str(round(proxy.retry_after_s * 1000))
    return web.json_response(body, status=status, headers=headers)
