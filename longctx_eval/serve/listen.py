"""Running an aiohttp application on a host and port: in the foreground until a signal (the CLI commands), or
on a background thread with its own event loop (tests and in-process tools)."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable

from aiohttp import web

from longctx_eval.errors import ConfigError


async def _start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = runner.addresses[0]
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    return runner, f"http://{shown}:{bound[1]}"


def serve_forever(app: web.Application, host: str, port: int, announce: Callable[[str], None] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; prints `listening on http://HOST:PORT` (the bound port when 0 was asked)."""

    async def main() -> None:
        runner, url = await _start(app, host, port)
        (announce or (lambda u: print(f"listening on {u}", flush=True)))(url)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())
    print("stopped", file=sys.stderr, flush=True)
    return 0


class BackgroundServer:
    """An application served from a daemon thread; `url` is its base (http://host:port), `close()` stops it."""

    def __init__(self, app: web.Application, host: str = "127.0.0.1", port: int = 0) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""
        self._thread = threading.Thread(target=self._run, args=(app, host, port), daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _run(self, app: web.Application, host: str, port: int) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self._runner, self.url = self.loop.run_until_complete(_start(app, host, port))
        except BaseException as exc:  # reported to the constructor's caller
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self._runner.cleanup())
        self.loop.close()

    def close(self) -> None:
        """Stop serving and join the thread."""
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
