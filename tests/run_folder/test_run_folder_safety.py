"""Nothing is written outside the run folder: run-folder names that cannot leave --out, no write through a link.

Each case is the campaign's (5.4-5.7): a model whose default name is `..`, and a symbolic link planted where
each file or folder of the run folder goes (before a first run and between two runs), pointing outside.
Real runs of the real `bm25` retriever on the real needle task.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tiny_needle import tiny_needle  # tests/ is on sys.path

from longctx_eval.cli import main
from longctx_eval.models.spec import parse_spec, slug
from longctx_eval.run_folder.naming import run_dir_for

RUN = ["run", "--model", "bm25", *tiny_needle("256"), "--limit", "1"]
FILES = [".lock", "manifest.json", "predictions.jsonl", "run.json", "predictions.quarantine.jsonl"]
FOLDERS = ["samples", "scores"]


@pytest.mark.parametrize(
    ("raw", "folder"),
    [
        ("openai:..@http://127.0.0.1:9/v1", "model"),
        ("openai:org/..@http://127.0.0.1:9/v1", "model"),
        ("hf:TMP/dir/sub/..", "model"),
        ("hf:TMP/dir/.", "model"),
        ("hf:TMP/dir/.hidden", "hidden"),
        ("openai:a\x07b\nc@http://127.0.0.1:9/v1", "a_b_c"),
    ],
)
def test_default_names_give_a_folder_inside_out(tmp_path, raw, folder):
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    (tmp_path / "dir" / ".hidden").mkdir()
    spec = parse_spec(raw.replace("TMP", str(tmp_path)))
    path = run_dir_for(tmp_path, spec)
    assert path.parent == tmp_path and path.name == folder


@pytest.mark.parametrize("name", ["..", ".", "...", "./..", "../x", "a/../..", ".git", "\x00", "_.._", "/"])
def test_slug_is_one_safe_component(name):
    s = slug(name)
    assert s and "/" not in s and not s.startswith(".") and s not in (".", "..")
    assert all(c.isalnum() or c in "._-" for c in s)


def test_openai_dot_dot_writes_nothing_into_the_parent(tmp_path, capsys):
    """`openai:..@URL` with no server: the folder is OUT/model, the parent of --out stays empty."""
    out = tmp_path / "out"
    out.mkdir()
    args = ["run", "--model", "openai:..@http://127.0.0.1:9/v1?tokenizer=bert-base-uncased"]
    main([*args, *tiny_needle("256"), "--limit", "1", "--out", str(out)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _victim(tmp_path: Path, name: str) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    if name in FOLDERS:
        victim = outside / f"{name}-dir"
        victim.mkdir()
    else:
        victim = outside / f"{name.strip('.')}-victim"
        victim.write_bytes(b'{"victim": true}\n')
    return victim


def _snapshot(victim: Path) -> object:
    if victim.is_dir():
        return sorted(p.name for p in victim.iterdir())
    return victim.read_bytes()


def _assert_refused(capsys, rc: int, link: Path) -> None:
    err = capsys.readouterr().err
    # exit 2 (nothing more can be written); scores/ is refused at scoring, where it fails its task (exit 1)
    assert rc == (1 if link.name == "scores" else 2), err
    assert f"{link} is a symbolic link" in err and "Traceback" not in err


@pytest.mark.parametrize("name", FILES + FOLDERS)
def test_link_planted_before_the_first_run_is_refused(tmp_path, capsys, name):
    out = tmp_path / "out"
    run_dir = out / "bm25"
    run_dir.mkdir(parents=True)
    victim = _victim(tmp_path, name)
    before = _snapshot(victim)
    (run_dir / name).symlink_to(victim)
    rc = main([*RUN, "--out", str(out)])
    if name == "predictions.quarantine.jsonl":  # only written when a line is bad: make one
        assert rc == 0
        with (run_dir / "predictions.jsonl").open("ab") as fh:
            fh.write(b"not json\n")
        capsys.readouterr()
        assert main([*RUN, "--out", str(out)]) == 0  # the bad line stays in place, skipped, with the reason
        err = capsys.readouterr().err
        assert f"cannot write predictions.quarantine.jsonl: {run_dir / name} is a symbolic link" in err
    else:
        _assert_refused(capsys, rc, run_dir / name)
    assert _snapshot(victim) == before
    assert (run_dir / name).is_symlink()  # left as it was, for the user to look at


@pytest.mark.parametrize("name", ["manifest.json", "predictions.jsonl", "run.json", *FOLDERS])
def test_link_planted_between_two_runs_is_refused(tmp_path, capsys, name):
    """A finished folder whose file is replaced by a link to a copy outside: the rerun touches neither."""
    out = tmp_path / "out"
    run_dir = out / "bm25"
    assert main([*RUN, "--out", str(out)]) == 0
    victim = _victim(tmp_path, name)
    if victim.is_dir():
        for p in (run_dir / name).iterdir():
            (victim / p.name).write_bytes(p.read_bytes())
    else:
        victim.write_bytes((run_dir / name).read_bytes())
    before = {p.name: p.read_bytes() for p in victim.iterdir()} if victim.is_dir() else victim.read_bytes()
    mtimes = {p: p.stat().st_mtime_ns for p in (victim.iterdir() if victim.is_dir() else [victim])}
    target = run_dir / name
    if target.is_dir():
        for p in target.iterdir():
            p.unlink()
        target.rmdir()
    else:
        target.unlink()
    target.symlink_to(victim)
    capsys.readouterr()
    rc = main([*RUN, "--out", str(out)])
    _assert_refused(capsys, rc, target)
    after = {p.name: p.read_bytes() for p in victim.iterdir()} if victim.is_dir() else victim.read_bytes()
    assert after == before
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes


def test_dangling_link_is_not_created_through(tmp_path, capsys):
    """A link to a file that does not exist yet: O_NOFOLLOW, so the run does not create it outside."""
    out = tmp_path / "out"
    run_dir = out / "bm25"
    run_dir.mkdir(parents=True)
    for name in (".lock", "predictions.jsonl"):
        target = tmp_path / f"created-{name.strip('.')}"
        (run_dir / name).symlink_to(target)
        rc = main([*RUN, "--out", str(out)])
        _assert_refused(capsys, rc, run_dir / name)
        assert not os.path.lexists(target)
        (run_dir / name).unlink()
