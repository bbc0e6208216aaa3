"""API keys come from an environment variable and appear nowhere else: not in any file a run writes (failed
requests' error messages included), not in what it prints, not in the server's log, not in a repr."""

from __future__ import annotations

from pathlib import Path

import pytest
from servers import SERVE_MODEL
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.cli.run import EXIT_TASK_FAILED
from longctx_eval.errors import ConfigError
from longctx_eval.models.loader import load_model
from longctx_eval.models.openai.client import ServedClient
from longctx_eval.models.spec import parse_spec

FAKE = "sk-longctx-FAKE-4c1d9e7a2b30f58e"
VAR = "LONGCTX_TEST_API_KEY"


def _leaks(text: bytes) -> bool:
    return FAKE.encode() in text or FAKE[3:].encode() in text or FAKE[-12:].encode() in text


def test_a_fake_key_appears_in_no_file_the_run_writes(
    serve_hf: str, fault_proxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd, tmp_path_factory
):
    monkeypatch.setenv(VAR, FAKE)
    url = fault_proxy(serve_hf, schedule="seq:500,429", retry_after_s=0.1)  # failed requests write error messages
    spec = f"openai:{SERVE_MODEL}@{url}?tokenizer=smollm2-135m&api_key_env={VAR}&max_attempts=1&max_in_flight=1"
    argv = ["run", "--model", spec, *tiny_needle("256"), "--limit", "2", "--out", str(tmp_path)]
    assert main(argv) == EXIT_TASK_FAILED  # every request failed: a failed task, never a score
    assert main(argv) == 0  # the resume re-runs the two failed requests
    run_dir = tmp_path / parse_spec(spec).name
    errors = [line for line in (run_dir / "predictions.jsonl").read_text().splitlines() if '"status": "error"' in line]
    assert len(errors) == 2  # both failures were written, with their messages
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"predictions.jsonl", "run.json", "manifest.json", "needle.jsonl"} <= {p.name for p in files}
    logs = [p for p in Path(tmp_path_factory.getbasetemp()).rglob("*.log") if p.is_file()]  # the server's log
    leaked = [str(p) for p in files + logs if _leaks(p.read_bytes())]
    assert not leaked, f"the API key is written in {leaked}"
    out, err = capfd.readouterr()
    assert not _leaks((out + err).encode())
    adapter = load_model(parse_spec(spec))
    try:
        assert not _leaks(repr(adapter).encode()) and not _leaks(repr(adapter.client).encode())
    finally:
        adapter.close()


def test_error_text_is_scrubbed_of_the_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(VAR, FAKE)
    client = ServedClient("http://127.0.0.1:9/v1", "m", api_key_env=VAR)
    echoed = f"Incorrect API key provided: {FAKE}. Header was 'Authorization: Bearer {FAKE}'"
    assert not _leaks(client.scrub(echoed).encode())
    assert "sk-***" in client.scrub("key sk-abcdefghijklmnop is wrong")


def test_a_hosted_api_without_its_key_names_the_variable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LONGCTX_UNSET_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"\$LONGCTX_UNSET_KEY"):
        ServedClient("https://api.openai.com/v1", "gpt-4o", api_key_env="LONGCTX_UNSET_KEY")
