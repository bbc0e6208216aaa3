"""longctx_eval/run_folder: see docs/architecture.md."""
