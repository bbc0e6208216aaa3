"""A secret pasted into a spec is masked in every message, as keys from the environment already are (5.10)."""

from __future__ import annotations

import pytest
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.secret_mask import mask_secrets

CANARY = "sk-LEAKzq7Xk2mP9vL4wR8tY1"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (f"openai:m@http://h/v1?api_key={CANARY}", "openai:m@http://h/v1?api_key=***"),
        ("x?token=abc123&timeout=5", "x?token=***&timeout=5"),
        ("x?password=hunter2", "x?password=***"),
        ("x?api_key_env=lowercasesecret", "x?api_key_env=***"),
        ("option api_key_env='abc-123' is invalid", "option api_key_env='***' is invalid"),
        ("http://user:pa55@host:8/v1", "http://***@host:8/v1"),
        ("header Bearer abc.def.ghi", "header Bearer ***"),
        ("hf_abcdefghijklmnopqr", "hf_***"),
        # what must stay: an environment variable's name, a tokenizer, a plain URL
        ("x?api_key_env=OPENAI_API_KEY&b=1", "x?api_key_env=OPENAI_API_KEY&b=1"),
        (
            "openai:m@http://127.0.0.1:9/v1?tokenizer=smollm2-135m",
            "openai:m@http://127.0.0.1:9/v1?tokenizer=smollm2-135m",
        ),
    ],
)
def test_mask_secrets(text, masked):
    assert mask_secrets(text) == masked


@pytest.mark.parametrize(
    "spec",
    [
        f"openai:m@http://127.0.0.1:9/v1?api_key={CANARY}",
        f"openai:m@http://127.0.0.1:9/v1?api_key_env={CANARY}",
        "openai:m@http://127.0.0.1:9/v1?api_key=plainsecretvalue",
        f"openai:m@http://user:{CANARY}@127.0.0.1:9/v1",
    ],
)
@pytest.mark.parametrize("dry", [False, True])
def test_a_key_in_a_spec_is_never_printed(tmp_path, capsys, spec, dry):
    args = ["run", "--model", spec, *tiny_needle("256"), "--out", str(tmp_path)]
    assert main(args + (["--dry-run"] if dry else [])) == 2
    out, err = capsys.readouterr()
    assert "***" in err and "Traceback" not in err
    for secret in (CANARY, "plainsecretvalue", CANARY.removeprefix("sk-")):
        assert secret not in out + err
    assert not any(secret in p.read_text() for p in tmp_path.rglob("*") if p.is_file() for secret in (CANARY,))


def test_a_key_in_an_accepted_option_is_masked_in_the_load_error(tmp_path, capsys):
    """A spec that parses, whose tokenizer option holds a key: the load error names it masked."""
    spec = f"openai:m@http://127.0.0.1:9/v1?tokenizer={CANARY}"
    main(["run", "--model", spec, *tiny_needle("256"), "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert CANARY.removeprefix("sk-") not in out + err and "sk-***" in err
