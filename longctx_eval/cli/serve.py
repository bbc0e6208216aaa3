"""`longctx-eval serve hf:<model>`: an OpenAI-compatible HTTP server over the `hf` adapter (no vLLM needed)."""

from __future__ import annotations

import argparse
import logging

from longctx_eval.serve.prompt_limit import CHARS_PER_TOKEN, NO_WINDOW_CHARS


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `serve`."""
    p = sub.add_parser(
        "serve",
        help="serve an hf: model over an OpenAI-compatible HTTP API",
        description="Serve one hf: model (loaded once, requests answered one at a time in arrival order) at "
        "GET /v1/models, POST /v1/chat/completions and /v1/completions (streamed as server-sent events when "
        "asked), POST /tokenize and /detokenize. Prints `listening on http://HOST:PORT` once ready.",
    )
    p.add_argument("model", metavar="MODEL", help="an hf: model spec, e.g. smollm2-135m or hf:/path/to/model")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on; 0 picks a free one (default 8000)")
    p.add_argument("--served-model-name", default=None, help="the model name clients send (default: the spec's name)")
    p.add_argument("--log-requests", action="store_true", help="log one line per generation request to stderr")
    p.add_argument(
        "--max-prompt-chars",
        type=int,
        default=None,
        metavar="N",
        help="refuse (HTTP 413, before tokenising) a prompt of more than N characters, a chat's messages counted "
        f"together (default: {CHARS_PER_TOKEN} per token of the model's context window, e.g. 262,144 for 8,192 "
        f"tokens; {NO_WINDOW_CHARS:,} when the window is unknown)",
    )
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Load the model, then serve until interrupted."""
    from longctx_eval.errors import ConfigError
    from longctx_eval.serve.app import build_app
    from longctx_eval.serve.engine import HFEngine
    from longctx_eval.serve.listen import serve_forever

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: expected 0 (a free port) to 65535")
    if args.max_prompt_chars is not None and args.max_prompt_chars < 1:
        raise ConfigError(f"--max-prompt-chars {args.max_prompt_chars}: expected a number of characters >= 1")
    logging.basicConfig(level=logging.INFO if args.log_requests else logging.WARNING, format="%(message)s")
    engine = HFEngine.load(args.model, args.served_model_name)
    return serve_forever(build_app(engine, args.max_prompt_chars), args.host, args.port)
