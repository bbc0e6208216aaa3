"""Several servers of one model (`openai:<model>@<url1>,<url2>`): the four questions of each needle_multiquery
document go to one server (cache affinity), the documents spread over both (least in flight), as the predictions
and the servers' own counters say. By default the two servers are two fault proxies (schedule all ok) on loopback
in front of the session's `longctx-eval serve`, counting what each received; the slow tests start two `serve`
processes and read their request logs."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from servers import SERVE_MODEL, http_json, root, serve_hf_server
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.errors import ConfigError
from longctx_eval.models.openai.target import parse_target
from longctx_eval.models.spec import expand_models, parse_spec
from longctx_eval.results import read_run


def test_several_base_urls_are_one_spec_and_one_name():
    raw = "openai:org/m@http://10.0.0.1:8000/v1,http://10.0.0.2:8000/v1?max_in_flight=2"
    assert expand_models(f"smollm2-135m,{raw},bm25") == ["smollm2-135m", raw, "bm25"]
    spec = parse_spec(raw)
    target = parse_target(spec.target, raw)
    assert target.model == "org/m" and target.base_urls == ("http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1")
    assert target.base_url == target.base_urls[0] and spec.name == "m"  # the run folder: the model, not the servers
    with pytest.raises(ConfigError, match="is given twice"):
        parse_spec("openai:m@http://h:1/v1,http://h:1/v1/")
    with pytest.raises(ConfigError, match="has no host"):
        parse_spec("openai:m@http://h:1/v1,http://")


def _run_multiquery(spec: str, out: Path) -> list[dict]:
    argv = ["run", "--model", spec, *tiny_needle("256", "needle_multiquery"), "--limit", "2"]
    argv += ["--task-arg", "needle_multiquery.source=synthetic", "--out", str(out)]
    assert main(argv) == 0
    return [json.loads(x) for x in (out / "pool" / "predictions.jsonl").read_text().splitlines()]


def _check_affinity(preds: list[dict], url_a: str, url_b: str) -> Counter:
    """One server per document, both servers used; the requests each server answered."""
    assert len(preds) == 8 and all(p["status"] == "ok" for p in preds)  # 2 documents x 4 questions
    by_doc: dict[str, set[str]] = {}
    for p in preds:
        by_doc.setdefault(p["sample_id"], set()).add(p["data"]["serving"]["server"])
    assert len(by_doc) == 2 and all(len(s) == 1 for s in by_doc.values())  # affinity: one server per document
    assert {next(iter(s)) for s in by_doc.values()} == {url_a, url_b}  # and the two documents on both servers
    return Counter(p["data"]["serving"]["server"] for p in preds)


def test_documents_stay_on_one_server_behind_two_proxies(serve_hf, fault_proxy, tmp_path: Path):
    url_a, url_b = fault_proxy(serve_hf, schedule="seq:ok"), fault_proxy(serve_hf, schedule="seq:ok")
    preds = _run_multiquery(f"openai:{SERVE_MODEL}@{url_a},{url_b}?tokenizer=smollm2-135m&name=pool", tmp_path)
    served = _check_affinity(preds, url_a, url_b)
    counted = [http_json(root(u) + "/fault-stats")[1]["requests"] for u in (url_a, url_b)]
    assert counted == [served[url_a], served[url_b]] == [4, 4]  # what each server received
    run = read_run(tmp_path / "pool" / "run.json")
    assert run.model.name == "pool" and run.tasks[0].serving is not None and run.tasks[0].serving.ok == 8


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[str, Path]]]:
    """Two `longctx-eval serve smollm2-135m` processes: (base URL, request log) each."""
    with ExitStack() as stack:
        out = []
        for i in range(2):
            logs = tmp_path_factory.mktemp(f"pool-serve-{i}")
            out.append((stack.enter_context(serve_hf_server(logs)), logs / f"serve-{SERVE_MODEL}.log"))
        yield out


def _generations(log: Path) -> int:
    return len(re.findall(r"^POST /v1/chat/completions ", log.read_text(errors="replace"), flags=re.M))


@pytest.mark.slow
def test_documents_stay_on_one_server_and_spread_over_both(two_servers, tmp_path: Path):
    (url_a, log_a), (url_b, log_b) = two_servers
    before = [_generations(log_a), _generations(log_b)]
    preds = _run_multiquery(f"openai:{SERVE_MODEL}@{url_a},{url_b}?tokenizer=smollm2-135m&name=pool", tmp_path)
    served = _check_affinity(preds, url_a, url_b)
    after = [_generations(log_a), _generations(log_b)]
    assert [after[0] - before[0], after[1] - before[1]] == [served[url_a], served[url_b]] == [4, 4]  # their logs


@pytest.mark.slow
def test_load_spreads_over_both_servers(two_servers, tmp_path: Path):
    (url_a, _), (url_b, _) = two_servers
    out = tmp_path / "load.json"
    spec = f"openai:{SERVE_MODEL}@{url_a},{url_b}?tokenizer=smollm2-135m"
    argv = ["load", "--model", spec, *tiny_needle("256"), "--limit", "2", "--warmup", "0"]
    argv += ["--task-arg", "needle.source=synthetic", "--concurrency", "2", "--max-requests", "2", "--out", str(out)]
    assert main(argv) == 0
    record = json.loads(out.read_text())
    assert record["base_urls"] == [url_a, url_b]
    (level,) = record["levels"]
    assert level["ok"] == 2 and level["by_server"] == {url_a: 1, url_b: 1}
