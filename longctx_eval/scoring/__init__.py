"""Scoring: run.json rows computed from saved predictions and gold (see docs/architecture.md)."""
