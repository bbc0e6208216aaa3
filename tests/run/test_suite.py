"""Suites: the default suite is well formed, a custom one runs, malformed ones fail with file and key."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longctx_eval.cli import main
from longctx_eval.discovery import discover
from longctx_eval.errors import ConfigError, LongctxError
from longctx_eval.models.kinds import MODEL_KINDS
from longctx_eval.models.spec import parse_spec
from longctx_eval.run.suite import load_suite

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("suite", ["default", "recall-full", "reference"])
def test_shipped_suites_name_known_models_and_tasks(suite, monkeypatch):
    from longctx_eval.models import model_source

    monkeypatch.setattr(model_source, "gemma3_installed", lambda: True)  # names are checked here, not installs
    plans = load_suite(suite, discover())
    assert {"minilm", "bm25", "smollm2-135m"} <= set(plans)
    for spec, tasks in plans.items():
        parse_spec(spec)
        for plan in tasks:
            assert plan.info.requires.pick(_capabilities(spec)) is not None, (spec, plan.info.name)


def _capabilities(spec: str) -> set[str]:
    """What the spec's kind declares it serves (read without loading the model)."""
    return {str(c) for c in MODEL_KINDS.get(parse_spec(spec).kind).serves}


def test_custom_suite_runs_with_per_task_lengths_and_limits(tmp_path):
    suite = tmp_path / "mine.toml"
    # 448 = a 256-token context + the 192-token prompt reserve (needle v5: a length is the whole prompt budget)
    suite.write_text("[oracle]\nneedle = { lengths = [448, 512], limit = 2 }\n\n[bm25]\nneedle = { lengths = [448] }\n")
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--out", str(out)]) == 0
    oracle = json.loads((out / "oracle" / "run.json").read_text())
    assert oracle["tasks"][0]["n_samples"] == 4
    assert [{k: t[k] for k in ("name", "lengths", "limit", "args")} for t in oracle["config"]["tasks"]] == [
        {"name": "needle", "lengths": [448, 512], "limit": 2, "args": {}}
    ]
    bm25 = json.loads((out / "bm25" / "run.json").read_text())
    assert bm25["tasks"][0]["n_samples"] == 5


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("[oracle]\nneedle = { lenghts = [256] }\n", "unknown key 'lenghts'. Did you mean 'lengths'?"),
        ("[oracle]\nneedle = { lengths = [0] }\n", "lengths must be a non-empty list of positive token counts"),
        ("[oracle]\nneedle = { limit = -1 }\n", "limit must be a positive number"),
        ("[oracle]\nneadle = {}\n", "unknown task 'neadle'"),
        ("[oracle\n", "not valid TOML"),
        ("oracle = 1\n", "must be a table of tasks"),
    ],
)
def test_malformed_suite_names_file_and_key(tmp_path, text, expect):
    suite = tmp_path / "bad.toml"
    suite.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_suite(str(suite), discover())
    assert str(suite) in str(info.value) or "unknown task" in str(info.value)
    assert expect in str(info.value)


def test_suite_and_model_together_is_an_error(tmp_path, capsys):
    assert main(["run", "--suite", "default", "--model", "bm25", "--out", str(tmp_path)]) == 2
    assert "drop --model/--tasks or drop --suite" in capsys.readouterr().err


# --- issue 39, cause 5 and note T11: hostile suite files ----------------------------------------------------------

NESTED = "[bm25]\nneedle = {{ lengths = [1024], limit = 1, args = {{ depths = {0}1{1} }} }}\n"


def test_a_suite_nested_thousands_deep_is_one_line(tmp_path):
    suite = tmp_path / "t.toml"
    suite.write_text(NESTED.format("[" * 3000, "]" * 3000))
    with pytest.raises(ConfigError) as info:
        load_suite(str(suite), discover())
    assert str(info.value).startswith(f"{suite}: a value is nested too deeply to read")
    suite.write_text(NESTED.format("[" * 50, "]" * 50))  # readable: refused by the argument's type
    with pytest.raises(ConfigError, match=r"needle.depths: expected int, got \[\[\["):
        load_suite(str(suite), discover())


def test_end_to_end_nested_suite_is_exit_2_one_line(tmp_path):
    """The fault campaign's reproduction (T7) through the CLI: exit 2, one line, no traceback."""
    suite = tmp_path / "t.toml"
    suite.write_text(NESTED.format("[" * 3000, "]" * 3000))
    cli = "import sys; from longctx_eval.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", cli, "run", "--suite", str(suite), "--dry-run", "--out", str(tmp_path / "o")]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"{suite}: a value is nested too deeply to read" in line


def test_a_byte_order_mark_is_read_as_utf8(tmp_path):
    """T11: Windows editors start UTF-8 files with U+FEFF; TOML is UTF-8 text, so the suite reads as without it."""
    text = "[oracle]\nneedle = { lengths = [448], limit = 2 }\n"
    plain, marked = tmp_path / "plain.toml", tmp_path / "marked.toml"
    plain.write_text(text)
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode())
    (want,), (got,) = load_suite(str(plain), discover())["oracle"], load_suite(str(marked), discover())["oracle"]
    assert (
        (got.info.name, got.lengths, got.limit) == (want.info.name, want.lengths, want.limit) == ("needle", (448,), 2)
    )
    marked.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf" + text.encode())  # a second one is text, refused as TOML
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_suite(str(marked), discover())


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ('["bm25\\nx"]\nneedle = 1\n', "['bm25\\nx'] needle: expected a table"),
        ('[bm25]\n"needle\\r" = { lengths = [0] }\n', "[bm25] 'needle\\r': lengths must be"),
        (
            '[bm25]\nneedle = { args_at = { "\\u00b2" = { per_cell = 1 } } }\n',
            "args_at.²: not one of the task's lengths",
        ),
    ],
    ids=["newline-in-model", "return-in-task", "superscript-length"],
)
def test_hostile_names_stay_one_line(tmp_path, text, expect):
    suite = tmp_path / "s.toml"
    suite.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_suite(str(suite), discover())
    assert len(str(info.value).splitlines()) == 1 and expect in str(info.value), str(info.value)


def _toml(value):
    """A Python value as TOML (strings as JSON strings, which TOML basic strings read the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


NAMES = st.one_of(
    st.sampled_from(["bm25", "oracle", "needle", "retrieval", "lengths", "limit", "args", "args_at", "depths"]),
    st.sampled_from(["per_cell", "source", "1024", "1k", "²", "-1", "0x10", "bm25?name=x", "hf:../..", "openai:m@"]),
    st.text(max_size=8),
)
VALUES = st.recursive(
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(), st.booleans(), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(NAMES, inner, max_size=3)),
    max_leaves=6,
)


@st.composite
def _suite_text(draw):
    """A suite of one model and task whose options are drawn: known and unknown keys, any TOML values."""
    options = draw(st.dictionaries(NAMES, VALUES, max_size=3))
    for key, values in [
        ("lengths", st.one_of(VALUES, st.lists(st.integers(-5, 5000), max_size=3))),
        ("limit", VALUES),
        ("args", st.dictionaries(NAMES, VALUES, max_size=3)),
        ("args_at", st.dictionaries(NAMES, st.one_of(VALUES, st.dictionaries(NAMES, VALUES, max_size=2)), max_size=2)),
    ]:
        if draw(st.booleans()):
            options[key] = draw(values)
    return f"[{json.dumps(draw(NAMES))}]\n{json.dumps(draw(NAMES))} = {_toml(options)}\n"


VALID = (
    "[bm25]\nneedle = { lengths = [1024], limit = 1, args = { depths = 3 }, args_at = { 1024 = { per_cell = 1 } } }\n"
)


@st.composite
def _spliced_bytes(draw):
    """A valid suite with bytes (any: invalid UTF-8, NUL, brackets, quotes) spliced in, or cut short."""
    data = VALID.encode()
    at = draw(st.integers(0, len(data)))
    if draw(st.booleans()):
        return data[:at]
    junk = draw(
        st.one_of(st.binary(max_size=12), st.text(max_size=6).map(lambda t: t.encode("utf-8", "surrogatepass")))
    )
    return data[:at] + junk + data[at:]


def _loads_or_one_line(path, data):
    """load_suite then, as `run` does, every model spec: a result or one ConfigError line, nothing else."""
    path.write_bytes(data)
    try:
        for spec in load_suite(str(path), discover()):
            parse_spec(spec)
    except LongctxError as exc:
        assert str(exc).strip() and len(str(exc).splitlines()) == 1, repr(str(exc))


def test_drawn_suites_load_or_fail_in_one_line(tmp_path):
    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_suite_text())
    def values(text):
        _loads_or_one_line(tmp_path / "s.toml", text.encode("utf-8", "surrogatepass"))

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_spliced_bytes())
    def spliced(data):
        _loads_or_one_line(tmp_path / "s.toml", data)

    values()
    spliced()


def test_a_suite_skips_an_opt_in_model_not_installed_and_says_so(tmp_path, monkeypatch, capsys):
    """The reference suite names Gemma 3 (opt-in): without its package the rest runs, one line says why Gemma did
    not, and a run that names Gemma itself (`--part`) stops with the install line, exit 2."""
    from longctx_eval.models import model_source

    monkeypatch.setattr(model_source, "gemma3_installed", lambda: False)
    suite = tmp_path / "mine.toml"
    oracle, gemma = "[oracle]\nneedle = { lengths = [448], limit = 2 }", "[gemma3-270m]\nneedle = { lengths = [448] }"
    counted = (
        '["coref:baseline?tokenizer=gemma3-270m&name=b3"]\ncoref_synthetic = { lengths = [1024] }'  # its tokenizer
    )
    suite.write_text(f"{oracle}\n\n{gemma}\n\n{counted}\n")
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "skipped (opt-in, not installed): model spec 'gemma3-270m'" in err and "make gemma3" in err
    assert "skipped (opt-in, not installed): model spec 'coref:baseline?tokenizer=gemma3-270m&name=b3'" in err
    assert (out / "oracle" / "run.json").is_file() and not (out / "gemma3-270m").exists()
    for part in ("gemma3-270m", "gemma3-270m:needle", "b3", "oracle,b3:coref_synthetic"):  # by its run-folder name
        assert main(["run", "--suite", str(suite), "--part", part, "--out", str(out)]) == 2
        assert "make gemma3" in capsys.readouterr().err
