"""`longctx-eval fault-proxy`: a loopback proxy injecting 429s, 500s, cut JSON, slow streams and dropped
connections between a client and an OpenAI-compatible server, on a seeded schedule."""

from __future__ import annotations

import argparse

from longctx_eval.serve.fault_schedule import DEFAULT_SCHEDULE


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `fault-proxy`."""
    p = sub.add_parser(
        "fault-proxy",
        help="proxy an OpenAI-compatible server, injecting faults on a seeded schedule",
        description="Forward to --upstream, injecting faults into generation requests (POST .../completions) "
        "on a seeded schedule; GET /fault-stats reports what was injected. Point the client at "
        "http://HOST:PORT/v1. Prints `listening on http://HOST:PORT` once ready.",
    )
    p.add_argument("--upstream", required=True, help="the server's root URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--seed", type=int, default=0, help="schedule seed (default 0)")
    p.add_argument(
        "--schedule",
        default=DEFAULT_SCHEDULE,
        help=f"FAULT=RATE,... with FAULT one of 429, 500, truncate, slow, drop (default {DEFAULT_SCHEDULE}), "
        "or seq:FAULT,FAULT,... (request i gets the i-th; ok for none)",
    )
    p.add_argument("--retry-after", type=float, default=1.0, help="seconds a 429 asks the client to wait (default 1)")
    p.add_argument("--slow-delay", type=float, default=0.2, help="seconds between events of a slow stream (0.2)")
    p.add_argument("--drop-after", type=int, default=1, help="events sent before a dropped stream closes (1)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to listen on; 0 picks a free one (default 0)")
    p.set_defaults(func=cmd_fault_proxy)


def cmd_fault_proxy(args: argparse.Namespace) -> int:
    """Serve the proxy until interrupted."""
    from longctx_eval.errors import ConfigError
    from longctx_eval.serve.fault_proxy import FaultProxy
    from longctx_eval.serve.listen import serve_forever

    if not args.upstream.startswith(("http://", "https://")):
        raise ConfigError(f"--upstream {args.upstream!r}: expected an http:// or https:// URL")
    for name in ("retry_after", "slow_delay"):
        if getattr(args, name) < 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 0")
    if args.drop_after < 0:
        raise ConfigError("--drop-after must be >= 0")
    proxy = FaultProxy(
        args.upstream,
        seed=args.seed,
        schedule=args.schedule,
        retry_after_s=args.retry_after,
        slow_delay_s=args.slow_delay,
        drop_after_events=args.drop_after,
    )
    return serve_forever(proxy.app(), args.host, args.port)
