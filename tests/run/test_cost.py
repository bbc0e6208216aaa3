"""`run --dry-run` and `--max-cost`: the price table, a dry run that measures exactly what the run then sends, and
a budget that stops a served run before it would be exceeded (counted at a proxy), keeps what was computed and
resumes; the served run's file carries the serving stats and the composite score."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from servers import SERVE_MODEL, http_json, root

from longctx_eval.cli import main
from longctx_eval.errors import ConfigError
from longctx_eval.models.spec import parse_spec
from longctx_eval.run.cost import PRICES, Budget, BudgetStop, Price, load_prices, price_of, served_model
from longctx_eval.sample import Prediction


def test_packaged_price_table_and_lookups():
    table = load_prices()
    assert table.path == PRICES and table.as_of
    assert table.get("gpt-4o-mini") == Price(0.15, 0.60)
    assert Price(2.0, 8.0).cost(1_000_000, 500_000) == pytest.approx(6.0)
    served = parse_spec("openai:gpt-4o-mini@https://api.openai.com/v1")
    assert served_model(served) == "gpt-4o-mini" and price_of(served, table).cost(1000, 0) == pytest.approx(0.00015)
    local = price_of(parse_spec("smollm2-135m"), table)
    assert local.local and local.cost(10**9, 10**9) == 0.0
    unknown = price_of(parse_spec("openai:my-llama@http://127.0.0.1:8000/v1"), table)
    assert not unknown.known and unknown.cost(1, 1) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[models.x]\ninput = 1\n", "expected exactly 'input' and 'output'"),
        ("[models.x]\ninput = -1\noutput = 1\n", "models.'x'.input: expected a number >= 0"),
        ('[models.x]\ninput = "1"\noutput = 1\n', "expected a number >= 0"),
        ("currency = 'EUR'\n", "unknown key 'currency'"),
        ("[models\n", "not valid TOML"),
    ],
)
def test_a_bad_price_table_is_named(tmp_path, text, message):
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        load_prices(path)
    assert str(path) in str(info.value)


def test_budget_stops_before_the_batch_that_could_exceed_it(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('[models."m"]\ninput = 1000\noutput = 2000\n')  # $0.001 / $0.002 per token
    spec = "openai:m@http://127.0.0.1:9/v1"
    budget = Budget(1.0, load_prices(path))
    budget.check_specs([parse_spec(spec)])
    budget.before(spec, [(500, 100)])  # up to $0.70: allowed
    budget.after(spec, [[(500, 100)]], [Prediction(text="x", prompt_tokens=500, completion_tokens=10)])
    assert budget.spent_usd == pytest.approx(0.52)  # the server's usage, not the bound
    with pytest.raises(BudgetStop, match=r"spent \$0.5200 of --max-cost \$1.0000"):
        budget.before(spec, [(400, 100)])  # 0.52 + 0.60 > 1.0
    budget.after(spec, [[(10, 5)]], [Prediction(status="error", error="timeout")])  # no usage: the upper bound
    assert budget.spent_usd == pytest.approx(0.52 + 0.02)
    budget.before("smollm2-135m", [(10**9, 10**9)])  # a local model never stops the run
    with pytest.raises(ConfigError, match="no price for served model 'other'"):
        budget.check_specs([parse_spec("openai:other@http://127.0.0.1:9/v1")])
    with pytest.raises(ConfigError, match="--max-cost"):
        Budget(-1.0, load_prices(path))


def _dry_row(text: str, model: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(model + " "))
    return line.split()


def test_dry_run_then_a_budgeted_served_run_resumes(serve_hf, fault_proxy, tmp_path, capsys):
    proxy = fault_proxy(serve_hf, schedule="seq:ok")
    spec = f"openai:{SERVE_MODEL}@{proxy}?tokenizer=smollm2-135m&batch_size=1&name=served"
    prices = tmp_path / "prices.toml"
    prices.write_text(f'[models."{SERVE_MODEL}"]\ninput = 1000\noutput = 1000\n')  # $0.001 per token
    out = tmp_path / "out"
    common = ["--model", spec, "--tasks", "needle", "--lengths", "512", "--limit", "2", "--prices", str(prices)]
    common += ["--task-arg", "needle.source=synthetic", "--out", str(out)]

    assert main(["run", "--dry-run", *common]) == 0
    text = capsys.readouterr().out
    _, _, requests, done, over, prompt, _, output, cost, *_ = _dry_row(text, "served")
    prompt_total, output_total = int(prompt.replace(",", "")), int(output.replace(",", ""))
    assert (requests, done, over) == ("2", "0", "0")
    assert cost == f"${(prompt_total + output_total) / 1000:,.4f}"
    assert "no generation request was sent and nothing was written" in text and not out.exists()
    assert http_json(root(proxy) + "/fault-stats")[1]["requests"] == 0

    one_request = (prompt_total + output_total) / 2 / 1000  # the two prompts are about equally long
    assert main(["run", *common, "--max-cost", f"{1.5 * one_request:.4f}"]) == 3
    err = capsys.readouterr().err
    assert "stopped at the cost budget" in err and "--max-cost" in err
    assert http_json(root(proxy) + "/fault-stats")[1]["requests"] == 1  # the second could have exceeded it
    preds = out / "served" / "predictions.jsonl"
    assert len(preds.read_text().splitlines()) == 1  # kept

    assert main(["run", *common, "--max-cost", "100"]) == 0  # resumes: sends only the missing one
    assert http_json(root(proxy) + "/fault-stats")[1]["requests"] == 2
    records = [json.loads(line) for line in preds.read_text().splitlines()]
    assert sum(r["prompt_tokens"] for r in records) == prompt_total  # the dry run measured what was sent
    run = json.loads((out / "served" / "run.json").read_text())
    (task,) = run["tasks"]
    assert task["n_samples"] == 2 and task["serving"]["ok"] == 2
    composite = task["composite"]
    assert composite["weights"] == {"throughput": 0.3, "latency": 0.25, "recall": 0.25, "fidelity": 0.2}
    assert composite["recall_metric"] == task["results"][0]["metric"] and composite["fidelity_n"] == 2
    assert composite["output_tokens_per_s"] == task["serving"]["throughput"]["output_tokens_per_s"]
    parts = sum(composite["weights"][k] * composite[k] for k in ("throughput", "latency", "recall", "fidelity"))
    assert composite["value"] == pytest.approx(parts)

    assert main(["run", "--dry-run", *common]) == 0
    assert _dry_row(capsys.readouterr().out, "served")[2:4] == ["0", "2"]  # nothing left to send, 2 done

    # `score` recomputes the composite with other weights, no server needed
    assert main(["score", str(out / "served"), "--composite-weights", "0,0,1,0"]) == 0
    rescored = json.loads((out / "served" / "run.json").read_text())["tasks"][0]["composite"]
    assert rescored["value"] == pytest.approx(rescored["recall"])


def test_a_served_choice_request_is_budgeted_as_a_call_per_choice(serve_hf, fault_proxy, tmp_path, capsys):
    """Scoring choices by echoed log-probabilities sends one call per choice, each billed for the prompt and its
    choice: the dry run counts every call, and a budget that covers the shared prompt once but not its calls
    stops before the first is sent (it was counted once, so the run spent several times its bound)."""
    proxy = fault_proxy(serve_hf, schedule="seq:ok")
    spec = f"openai:{SERVE_MODEL}@{proxy}?tokenizer=smollm2-135m&endpoint=completions&batch_size=1&name=served"
    prices = tmp_path / "prices.toml"
    prices.write_text(f'[models."{SERVE_MODEL}"]\ninput = 1000\noutput = 1000\n')  # $0.001 per token
    out = tmp_path / "out"
    common = ["--model", spec, "--tasks", "coref_synthetic", "--lengths", "1024", "--prices", str(prices)]
    common += ["--task-arg", "coref_synthetic.per_length=1", "--task-arg", "coref_synthetic.asked=2"]
    common += ["--out", str(out)]

    assert main(["run", "--dry-run", *common]) == 0
    _, _, requests, _, _, prompt, longest, output, *_ = _dry_row(capsys.readouterr().out, "served")
    requests, prompt, longest = int(requests), int(prompt.replace(",", "")), int(longest.replace(",", ""))
    calls = int(output.replace(",", ""))  # each call generates at most 1 token
    assert calls > requests >= 1 and prompt > calls * 900  # a call per choice, each with the whole prompt
    assert http_json(root(proxy) + "/fault-stats")[1]["requests"] == 0  # a dry run sends nothing

    assert main(["run", *common, "--max-cost", f"{1.5 * longest / 1000:.4f}"]) == 3  # > one prompt, < its calls
    assert "stopped at the cost budget" in capsys.readouterr().err
    preds = out / "served" / "predictions.jsonl"
    assert not preds.exists() or not preds.read_text()  # no choice's call was sent
    probes = http_json(root(proxy) + "/fault-stats")[1]["requests"]  # the capability check's echo probe only
    assert probes <= 2

    assert main(["run", *common, "--max-cost", "1000"]) == 0
    sent = http_json(root(proxy) + "/fault-stats")[1]["requests"] - 2 * probes
    assert sent == calls  # the dry run counted every call the run then sent


def test_unknown_price_is_said_and_refused(tmp_path, capsys):
    spec = "openai:no-such-model@http://127.0.0.1:9/v1"
    with pytest.raises(SystemExit):
        main(["run", "--max-cost"])  # argparse: a value is required
    capsys.readouterr()
    code = main(["run", "--model", spec, "--tasks", "needle", "--max-cost", "1", "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert "no price for served model 'no-such-model'" in err
    # the entry to add is printed verbatim (rich markup once swallowed the [models."..."] line)
    assert err.splitlines()[-3:] == [
        '[models."no-such-model"]',
        "input = <USD per 1M prompt tokens>",
        "output = <USD per 1M output tokens>",
    ]
    assert not Path(tmp_path / "o" / "no-such-model").exists()


def test_a_self_hosted_price_is_estimated_from_a_gpu_hour_and_measured_throughput(serve_hf, tmp_path, capsys):
    spec = f"openai:{SERVE_MODEL}@{serve_hf}?tokenizer=smollm2-135m&batch_size=1&name=gpu-hour"
    load = tmp_path / "load.json"  # the shape `longctx-eval load` writes (its best level is what counts)
    levels = [{"concurrency": 1, "total_tokens_per_s": 400.0}, {"concurrency": 8, "total_tokens_per_s": 1000.0}]
    load.write_text(json.dumps({"kind": "load_test", "served_model": SERVE_MODEL, "levels": levels}))
    out = tmp_path / "out"
    common = ["--model", spec, "--tasks", "needle", "--lengths", "512", "--limit", "2", "--out", str(out)]
    common += ["--task-arg", "needle.source=synthetic", "--throughput-from", str(load)]

    assert main(["run", "--dry-run", *common]) == 0  # no estimate asked for: cost unknown
    assert _dry_row(capsys.readouterr().out, "gpu-hour")[8] == "unknown"
    # $3600 an hour at 1000 tokens/s is $1 a second: $0.001 per token, $1000 per 1M tokens
    assert main(["run", "--dry-run", *common, "--gpu-hour-price", "3600"]) == 0
    captured = capsys.readouterr()
    assert "estimated $1000.0000 per 1M tokens = $3600/hour over measured 1,000 tokens/s at concurrency 8" in (
        captured.err
    )
    _, _, requests, _, _, prompt, _, output, cost, *_ = _dry_row(captured.out, "gpu-hour")
    total = int(prompt.replace(",", "")) + int(output.replace(",", ""))
    assert requests == "2" and cost == f"${total / 1000:,.4f}"
    assert main(["run", *common, "--gpu-hour-price", "3600", "--max-cost", f"{0.5 * total / 2 / 1000:.4f}"]) == 3
    assert "stopped at the cost budget" in capsys.readouterr().err  # the budget ran on the estimate

    assert main(["run", "--dry-run", *common[:-2], "--gpu-hour-price", "3600"]) == 2
    assert "--gpu-hour-price needs --throughput-from" in capsys.readouterr().err
    load.write_text(json.dumps({"kind": "load_test", "served_model": "other", "levels": levels}))
    assert main(["run", "--dry-run", *common, "--gpu-hour-price", "3600"]) == 2
    assert f"it measured 'other', not served model '{SERVE_MODEL}'" in capsys.readouterr().err
