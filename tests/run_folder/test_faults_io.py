"""Faults with real files: torn and corrupt predictions, a full disk, file modes, two runs on one folder.

The full disk is a real 64 KiB tmpfs mounted for the test (needs root; skipped with the reason otherwise);
one test also injects ENOSPC where a real disk cannot be made to fail at the exact byte we need.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from longctx_eval import atomic_io as lio
from longctx_eval.atomic_io import atomic_write_bytes, atomic_write_text
from longctx_eval.errors import LongctxError, OutputError, RunFileError
from longctx_eval.run_folder import predictions as preds
from longctx_eval.run_folder.lock import RunFolderBusy, RunLock, lock_holder
from longctx_eval.run_folder.predictions import (
    PredictionStore,
    prediction_key,
    prediction_to_record,
    record_to_prediction,
)
from longctx_eval.sample import Hit, Prediction, Request, RetrievalParams

# --------------------------------------------------------------------------------------------- helpers


def _key(i: int) -> str:
    return prediction_key("needle", "3", f"s{i}#0", Request(f"s{i}", "p", "c", "q"), {"kind": "test"})


def _record(i: int, text: str = "ünïcode answer — ✓ 東京") -> dict:
    pred = Prediction(text=text, hits=(Hit(0, 5, 1.5),), prompt_tokens=12, completion_tokens=3, seconds=0.25)
    extra = {"task_version": "3", "target_tokens": 1024, "max_new_tokens": 32, "capability": "generate", "part": 0}
    return prediction_to_record(_key(i), "needle", f"s{i}", pred, extra)


def _filled(path: Path, n: int) -> PredictionStore:
    store = PredictionStore(path)
    for i in range(n):
        store.append(_record(i))
    return store


def _quarantined(path: Path) -> list[dict]:
    q = preds.quarantine_path_of(path)
    return [json.loads(line) for line in q.read_bytes().splitlines()] if q.exists() else []


def _reopen_is_clean(path: Path, n: int) -> None:
    again = PredictionStore(path)
    assert again.warnings == [] and again.torn_lines == []
    assert len(again.records) == n


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def small_fs(tmp_path):
    """A real 64 KiB file system (tmpfs); skipped when this process may not mount one."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"a small real file system needs `mount -t tmpfs` (root): {res.stderr.strip() or 'failed'}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path: Path) -> None:
    """Fill the file system holding `path` with a filler file until it is full."""
    with contextlib.suppress(OSError), path.open("wb", buffering=0) as fh:
        while True:
            fh.write(b"\0" * 1024)


# --------------------------------------------------------------------------------------------- keys


def test_prediction_key_is_unchanged():
    """Keys computed before this change: existing predictions.jsonl files keep resuming."""
    r = Request(
        sample_id="s1",
        prompt="Where is the needle? ünïcode",
        context="ctx — text",
        query="needle?",
        max_new_tokens=16,
        retrieval=RetrievalParams(chunk_tokens=64, chunk_overlap=8, k=5),
        extra={"a": [1, 2]},
    )
    key = prediction_key("needle", "3", "s1#0", r, {"kind": "bm25", "k1": 1.2})
    assert key == "ab2b862a05840ecb4983ac47efb19145bd8efae4911e9e0c19339156fd5566a9"
    key = prediction_key("t", "1", "s2#0", Request(sample_id="s2", prompt="p", context="c", query="q"), {})
    assert key == "59115c0ffac21cbfc8c56b60c14ee6309dbe564b12f620be58c4238b393fabbe"


def test_round_trip_and_records_written_before_checks_existed(tmp_path):
    path = tmp_path / "predictions.jsonl"
    store = _filled(path, 2)
    rec = store.records[_key(1)]
    assert rec["check"] == preds.record_check(rec)
    pred = record_to_prediction(rec)
    assert pred.text == _record(1)["text"] and pred.hits == (Hit(0, 5, 1.5),) and pred.prompt_tokens == 12

    # a file written by the previous version (no line has a `check`) is used as it is, said once
    old = tmp_path / "old" / "predictions.jsonl"
    old.parent.mkdir()
    old.write_bytes(b"".join(json.dumps(_record(i), ensure_ascii=False).encode() + b"\n" for i in range(3)))
    store = PredictionStore(old)
    assert len(store.records) == 3 and store.torn_lines == []
    assert len(store.warnings) == 1 and "written before prediction lines carried a 'check'" in store.warnings[0]


def test_a_deleted_check_is_an_alteration(tmp_path):
    """Campaign 3.11: an answer edited and its `check` deleted, in a file whose lines carry checks."""
    path = tmp_path / "predictions.jsonl"
    _filled(path, 3)
    lines = path.read_bytes().splitlines()
    rec = json.loads(lines[0])
    del rec["check"]
    rec["hits"] = [[0, 10, 9.0]]
    lines[0] = json.dumps(rec, ensure_ascii=False).encode()
    path.write_bytes(b"\n".join(lines) + b"\n")
    store = PredictionStore(path)
    assert rec["key"] not in store.records and len(store.records) == 2 and store.torn_lines == [1]
    assert len(store.warnings) == 1 and "lacks its 'check' field" in store.warnings[0]
    assert "moved to predictions.quarantine.jsonl" in store.warnings[0]
    assert _quarantined(path)[0]["line"] == 1
    _reopen_is_clean(path, 2)


# --------------------------------------------------------------------------------------------- torn and corrupt lines


def test_line_torn_inside_a_multibyte_character_is_quarantined_once(tmp_path, umask022):
    path = tmp_path / "predictions.jsonl"
    _filled(path, 3)
    line = json.dumps(_record(3), ensure_ascii=False).encode("utf-8")
    cut = line.index("東".encode()) + 1  # inside the 3-byte character
    torn = line[:cut]
    with pytest.raises(UnicodeDecodeError):
        torn.decode("utf-8")
    with path.open("ab") as fh:
        fh.write(torn)  # a kill during the write: no newline, half a character

    store = PredictionStore(path)
    assert len(store.records) == 3 and _key(3) not in store
    assert store.torn_lines == [4]
    (warning,) = store.warnings
    assert warning.startswith(f"{path}:4: not UTF-8") and "torn line" in warning
    assert "moved to predictions.quarantine.jsonl" in warning and "will be redone" in warning
    assert "\n" not in warning
    assert torn not in path.read_bytes()
    (side,) = _quarantined(path)
    assert base64.b64decode(side["bytes_b64"]) == torn  # the bytes, exactly
    assert side["line"] == 4 and side["source"] == "predictions.jsonl" and "not UTF-8" in side["reason"]
    assert (path.stat().st_mode & 0o777) == 0o644
    assert (preds.quarantine_path_of(path).stat().st_mode & 0o777) == 0o644

    _reopen_is_clean(path, 3)  # the second open reports nothing
    store = PredictionStore(path)
    store.append(_record(3))  # the sample is redone
    _reopen_is_clean(path, 4)
    assert len(_quarantined(path)) == 1


def test_torn_line_in_the_middle_and_missing_newline_repair(tmp_path):
    """A torn line followed by lines of a later run (the newline was repaired) is the only one moved."""
    path = tmp_path / "predictions.jsonl"
    _filled(path, 2)
    with path.open("ab") as fh:
        fh.write(json.dumps(_record(2)).encode()[:30])  # torn, no newline
    store = PredictionStore(path, repair=False)  # a reader: skips it, leaves it in place
    assert store.torn_lines == [3] and "left in place" in store.warnings[0]
    before = path.read_bytes()
    store.append(_record(3))  # starts its own line
    assert path.read_bytes().startswith(before + b"\n")
    store = PredictionStore(path)
    assert store.torn_lines == [3] and len(store.records) == 3 and _key(2) not in store
    _reopen_is_clean(path, 3)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff\xfe\x00 garbage \x80\x81", "not UTF-8"),
        (b"\0" * 64, "not valid JSON"),
        (b'{"key": "abc"', "not valid JSON"),
        (b"[1, 2, 3]", "not a JSON object"),
        (b'{"seconds": NaN}', "not valid JSON"),
    ],
)
def test_garbage_bytes_are_quarantined(tmp_path, raw, reason):
    path = tmp_path / "predictions.jsonl"
    _filled(path, 2)
    with path.open("ab") as fh:
        fh.write(raw + b"\n")
    store = PredictionStore(path)
    assert len(store.records) == 2
    (warning,) = store.warnings
    assert f"{path}:3: {reason}" in warning
    assert base64.b64decode(_quarantined(path)[0]["bytes_b64"]) == raw
    _reopen_is_clean(path, 2)


def _mutations() -> list[tuple[str, object, str]]:
    return [
        ("prompt_tokens", "15", "field 'prompt_tokens'"),
        ("prompt_tokens", True, "field 'prompt_tokens'"),
        ("seconds", "0.25", "field 'seconds'"),
        ("seconds", -1.0, "field 'seconds'"),
        ("status", "done", "field 'status'"),
        ("hits", [[1, "2", 0.5]], "field 'hits'[0]"),
        ("hits", [[5, 1, 0.5]], "field 'hits'[0]"),
        ("hits", [[0, 1]], "field 'hits'[0]"),
        ("hits", "none", "field 'hits'"),
        ("text", 42, "field 'text'"),
        ("data", [1], "field 'data'"),
        ("part", -1, "field 'part'"),
        ("key", "ABC123", "field 'key'"),
        ("key", _key(0)[:-1] + "g", "field 'key'"),
        ("sample_id", "", "field 'sample_id'"),
    ]


@pytest.mark.parametrize(("field", "value", "reason"), _mutations())
def test_wrong_typed_record_is_quarantined(tmp_path, field, value, reason):
    path = tmp_path / "predictions.jsonl"
    _filled(path, 1)
    bad = {**_record(1), field: value}  # written by something else: no check, wrong type
    with path.open("ab") as fh:
        fh.write(json.dumps(bad, ensure_ascii=False).encode() + b"\n")
    store = PredictionStore(path)
    assert list(store.records) == [_key(0)]
    (warning,) = store.warnings
    assert reason in warning
    if field != "sample_id":
        assert "sample 's1' will be redone" in warning
    _reopen_is_clean(path, 1)


def test_record_with_only_its_key(tmp_path):
    path = tmp_path / "predictions.jsonl"
    _filled(path, 1)
    with path.open("ab") as fh:
        fh.write(json.dumps({"key": _key(1)}).encode() + b"\n")
    store = PredictionStore(path)
    assert _key(1) not in store
    (warning,) = store.warnings
    assert "lacks field(s) task, sample_id, text, hits, status" in warning
    _reopen_is_clean(path, 1)


def test_flipped_digit_fails_the_check(tmp_path):
    path = tmp_path / "predictions.jsonl"
    _filled(path, 2)
    data = path.read_bytes()
    assert data.count(b'"prompt_tokens": 12') == 2
    path.write_bytes(data.replace(b'"prompt_tokens": 12', b'"prompt_tokens": 13', 1))
    store = PredictionStore(path)
    assert _key(0) not in store and _key(1) in store
    assert "check does not match" in store.warnings[0]
    _reopen_is_clean(path, 1)


def test_append_refuses_a_record_that_would_not_read_back(tmp_path):
    path = tmp_path / "predictions.jsonl"
    store = PredictionStore(path)
    with pytest.raises(RunFileError, match="lacks field"):
        store.append({"key": _key(0)})
    with pytest.raises(RunFileError, match="cannot be written as JSON"):
        store.append({**_record(0), "seconds": float("nan")})
    with pytest.raises(RunFileError, match="field 'status'"):
        store.append({**_record(0), "status": "weird"})
    assert not path.exists() or path.read_bytes() == b""


def test_concurrent_appenders_never_interleave(tmp_path):
    """Two processes appending to one file (no RunLock): every line is whole."""
    path = tmp_path / "predictions.jsonl"
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_faults_io import _record
        from longctx_eval.run_folder.predictions import PredictionStore
        store = PredictionStore(Path({str(path)!r}))
        base = int(sys.argv[1])
        for i in range(base, base + 150):
            store.append(_record(i, text="x" * 3000))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(b)]) for b in (0, 1000)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    _reopen_is_clean(path, 300)


# --------------------------------------------------------------------------------------------- full disk


def test_full_disk_append_is_one_line_and_leaves_no_torn_line(small_fs):
    path = small_fs / "run" / "predictions.jsonl"
    path.parent.mkdir()
    store = PredictionStore(path)
    with pytest.raises(OutputError) as info:
        for i in range(1000):
            store.append(_record(i, text="y" * 700))
    msg = str(info.value)
    assert msg.startswith(f"cannot append to {path}: No space left on device") and "\n" not in msg
    written = len(store.records)
    assert written > 10
    assert path.read_bytes().endswith(b"\n")  # the partial line was cut back
    _reopen_is_clean(path, written)


def test_full_disk_torn_line_is_quarantined_once_space_is_back(small_fs):
    path = small_fs / "predictions.jsonl"
    _filled(path, 3)
    room = small_fs / "room"
    room.write_bytes(b"\0" * 30_000)  # given back later
    _fill(small_fs / "filler")
    with contextlib.suppress(OSError), path.open("ab", buffering=0) as fh:
        fh.write(json.dumps(_record(9, text="z" * 8000)).encode())  # a writer that died on the full disk
    assert not path.read_bytes().endswith(b"\n")
    before = path.read_bytes()
    store = PredictionStore(path)  # nothing can be moved on a full disk: skipped, said so, file untouched
    assert len(store.records) == 3
    (warning,) = store.warnings
    assert "left in place (cannot write predictions.quarantine.jsonl: No space left on device)" in warning
    assert path.read_bytes() == before
    assert not list(small_fs.glob(".*.tmp"))
    room.unlink()  # space is back
    store = PredictionStore(path)
    (warning,) = store.warnings
    assert ", moved to predictions.quarantine.jsonl; sample 's9' will be redone" in warning
    assert len(_quarantined(path)) == 1
    _reopen_is_clean(path, 3)


def test_full_disk_atomic_write_keeps_the_old_file(small_fs, umask022):
    target = small_fs / "run.json"
    atomic_write_text(target, '{"old": true}\n')
    _fill(small_fs / "filler")
    with pytest.raises(OutputError) as info:
        atomic_write_bytes(target, b"x" * 200_000)
    msg = str(info.value)
    assert msg.startswith(f"cannot write {target}: No space left on device") and "\n" not in msg
    assert target.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in small_fs.iterdir()) == ["filler", "run.json"]  # no temp file left


def test_full_disk_cli_exits_2_with_one_line(small_fs, capsys):
    from longctx_eval.cli import main

    _fill(small_fs / "filler")
    out = small_fs / "schema.json"
    assert main(["schema", "--out", str(out)]) == 2
    err = capsys.readouterr()
    text = (err.out + err.err).strip()
    assert "No space left on device" in text and str(out) in text.replace("\n", "")
    assert "Traceback" not in text and not out.exists()


def test_read_only_file_system(small_fs):
    target = small_fs / "run.json"
    atomic_write_text(target, "old\n")
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    with pytest.raises(LongctxError):  # ConfigError "not writable" or OutputError "Read-only file system"
        atomic_write_text(target, "new\n")
    assert target.read_text() == "old\n"


def test_injected_enospc_mid_append_when_the_cut_back_also_fails(tmp_path, monkeypatch):
    """A real disk cannot fail between two bytes of a line on cue: inject it, and make the truncate fail too."""
    path = tmp_path / "predictions.jsonl"
    store = _filled(path, 2)
    real_write = os.write

    def half_then_enospc(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def no_truncate(fd, size):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(preds.os, "write", half_then_enospc)
    monkeypatch.setattr(preds.os, "ftruncate", no_truncate)
    with pytest.raises(OutputError, match="No space left on device"):
        store.append(_record(2))
    monkeypatch.undo()
    store = PredictionStore(path)  # the torn half line is quarantined, the rest kept
    assert len(store.records) == 2 and store.torn_lines == [3]
    _reopen_is_clean(path, 2)


def test_injected_enospc_at_fsync_of_atomic_write(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    target.write_text("old\n")

    def enospc(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(lio.os, "fsync", enospc)
    with pytest.raises(OutputError, match=r"cannot write .*manifest.json: No space left on device"):
        atomic_write_text(target, "new\n")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_oserror_about_another_file_is_not_relabelled(tmp_path):
    with pytest.raises(FileNotFoundError), lio.atomic_output(tmp_path / "out.bin") as fh:
        fh.write((tmp_path / "missing-input").read_bytes())
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------- modes


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_files_get_the_umask_mode(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        atomic_write_text(tmp_path / "a.json", "{}\n")
        atomic_write_text(tmp_path / "a.json", "{}\n")  # replacing keeps the same rule
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == mode == plain.stat().st_mode & 0o777


# --------------------------------------------------------------------------------------------- run lock

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from longctx_eval.run_folder.lock import RunLock
    with RunLock(Path(sys.argv[1]), shared=sys.argv[2] == "shared", command="longctx-eval run --out X"):
        print("locked", flush=True)
        time.sleep(120)
    """
)

_CONTENDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from longctx_eval.errors import LongctxError
    from longctx_eval.run_folder.lock import RunLock
    try:
        with RunLock(Path(sys.argv[1])):
            print("got it")
    except LongctxError as exc:
        print(exc)
        sys.exit(2)
    """
)


@contextlib.contextmanager
def _holder(run_dir: Path, mode: str = "exclusive"):
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run_dir), mode], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_second_process_fails_at_once_naming_folder_pid_and_start(tmp_path):
    run_dir = tmp_path / "out" / "bm25"
    with _holder(run_dir) as proc:
        with pytest.raises(RunFolderBusy) as info:
            RunLock(run_dir).acquire()
        msg = str(info.value)
        started = lock_holder(run_dir)["started"]
        assert msg.startswith(f"run folder {run_dir} is in use by pid {proc.pid} since {started}")
        assert "longctx-eval run --out X" in msg and msg.endswith("wait for it, or give another --out")
        with pytest.raises(RunFolderBusy):
            RunLock(run_dir, shared=True).acquire()  # `score` waits for the writer too
        # and a real second Python process, as the CLI would meet it
        res = subprocess.run([sys.executable, "-c", _CONTENDER, str(run_dir)], capture_output=True, text=True)
        assert res.returncode == 2 and f"in use by pid {proc.pid}" in res.stdout
    res = subprocess.run([sys.executable, "-c", _CONTENDER, str(run_dir)], capture_output=True, text=True)
    assert res.returncode == 0 and "got it" in res.stdout  # free once the holder is gone


def test_killed_holder_does_not_block(tmp_path):
    run_dir = tmp_path / "run"
    with _holder(run_dir) as proc:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert lock_holder(run_dir)["pid"] == proc.pid  # the stale label is still there
    with RunLock(run_dir) as lock:
        assert lock_holder(run_dir)["pid"] == os.getpid()
        assert lock.path.exists()
    assert lock_holder(run_dir) is None  # a clean exit leaves no label


def test_readers_share_and_block_a_writer(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with _holder(run_dir, "shared"):
        with RunLock(run_dir, shared=True):
            pass  # two readers at once
        with pytest.raises(RunFolderBusy, match="in use by another process"):
            RunLock(run_dir).acquire()


def test_lock_is_reentrant_in_one_process(tmp_path):
    run_dir = tmp_path / "run"
    with RunLock(run_dir), RunLock(run_dir), RunLock(run_dir, shared=True):
        assert lock_holder(run_dir)["pid"] == os.getpid()
    res = subprocess.run([sys.executable, "-c", _CONTENDER, str(run_dir)], capture_output=True, text=True)
    assert res.returncode == 0  # fully released after the outermost exit
