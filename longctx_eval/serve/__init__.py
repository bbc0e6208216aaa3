"""Serving over HTTP: `longctx-eval serve` (an OpenAI-compatible server over the `hf` adapter) and the
fault-injection proxy `longctx-eval fault-proxy` that tests clients against 429s, 500s, bad JSON, slow
streams and dropped connections."""
