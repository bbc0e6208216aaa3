"""longctx_eval/run: see docs/architecture.md."""
