"""RUN_DIR/predictions.jsonl: append-only, one flushed line per finished sample, keyed for resumption."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from longctx_eval.hashing import sha256_json, sha256_text
from longctx_eval.sample import Hit, Prediction, Request


def prediction_key(task: str, version: str, sample_id: str, request: Request, identity: Mapping[str, Any]) -> str:
    """Hash of (task, version, sample id, exact prompt and context, model identity, settings)."""
    return sha256_json(
        {
            "task": task,
            "version": version,
            "sample": sample_id,
            "prompt": sha256_text(request.prompt),
            "context": sha256_text(request.context),
            "query": request.query,
            "max_new_tokens": request.max_new_tokens,
            "retrieval": asdict(request.retrieval),
            "extra": sha256_json(dict(request.extra)),
            "model": dict(identity),
        }
    )


def prediction_to_record(key: str, task: str, sample_id: str, pred: Prediction, extra: Mapping[str, Any]) -> dict:
    """The JSON line written for one prediction."""
    rec = {"key": key, "task": task, "sample_id": sample_id, **asdict(pred), **extra}
    rec["hits"] = [[h.char_start, h.char_end, h.score] for h in pred.hits]
    rec.pop("parts")  # each part is a record of its own
    return rec


def record_to_prediction(rec: Mapping[str, Any]) -> Prediction:
    """Inverse of `prediction_to_record` for the prediction fields."""
    return Prediction(
        text=rec.get("text"),
        hits=tuple(Hit(int(s), int(e), float(sc)) for s, e, sc in rec.get("hits", [])),
        status=rec.get("status", "ok"),
        prompt_tokens=rec.get("prompt_tokens"),
        completion_tokens=rec.get("completion_tokens"),
        seconds=float(rec.get("seconds", 0.0)),
        error=rec.get("error"),
        data=rec.get("data"),
    )


def combine_parts(parts: list[Prediction]) -> Prediction:
    """One prediction for a sample answered through several requests; its status is the worst part's."""
    if len(parts) == 1:
        return parts[0]
    status = next((p.status for p in parts if p.status != "ok"), "ok")
    return Prediction(
        status=status,
        prompt_tokens=sum(p.prompt_tokens or 0 for p in parts),
        completion_tokens=sum(p.completion_tokens or 0 for p in parts),
        seconds=sum(p.seconds for p in parts),
        error=next((p.error for p in parts if p.error), None),
        parts=tuple(parts),
    )


class PredictionStore:
    """Reads what is done, then appends new lines with flush + fsync so a kill loses at most the line in flight."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, dict] = {}
        self.torn_lines: list[int] = []
        if path.exists():
            for lineno, rec in self._read():
                if rec is None:
                    self.torn_lines.append(lineno)
                else:
                    self.records[rec["key"]] = rec

    def _read(self) -> Iterator[tuple[int, dict | None]]:
        with self.path.open("r", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    yield lineno, None  # a line torn by a kill mid-write: that sample is simply redone
                    continue
                yield lineno, rec if isinstance(rec, dict) and "key" in rec else None

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def append(self, record: dict) -> None:
        """Append one record durably."""
        needs_newline = self.path.exists() and self.path.stat().st_size > 0 and not self._ends_with_newline()
        with self.path.open("a", encoding="utf-8") as fh:
            if needs_newline:
                fh.write("\n")
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.records[record["key"]] = record

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"
