"""A hand-edited dataset card (README.md front matter) read by `export` (issue 39, cause 4; notes E11, E12).

A real needle dataset is built once; copies of it get the fault campaign's card edits, each refused in one line
naming the card and the field (exit 2). Hypothesis then mutates the front matter (a value replaced or removed,
text spliced in, the card cut) and runs the export's reader and writers: a result or a one-line ConfigError.
"""

from __future__ import annotations

import copy
import itertools
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_builders.dataset.export import build_dataset
from data_builders.dataset.registry import BuildConfig
from longctx_eval.errors import ConfigError, LongctxError
from longctx_eval.export.built_dataset import read_built
from longctx_eval.export.inspect_task import write_inspect
from longctx_eval.export.lm_eval_task import write_lm_eval
from longctx_eval.export.targets import check_dataset, export_target

REPO = Path(__file__).resolve().parents[2]
LENGTH = 352  # a 160-token context after the prompt reserve


@pytest.fixture(scope="module")
def dataset(bpe_tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("card") / "ds"
    build_dataset(
        "needle", BuildConfig(lengths=(LENGTH,), depths=2, per_cell=1, seed=0, source="synthetic"), out, bpe_tokenizer
    )
    return out


def _edited(dataset: Path, dest: Path, old: str, new: str) -> Path:
    shutil.copytree(dataset, dest)
    card = dest / "README.md"
    text = card.read_text()
    assert old in text, old
    card.write_text(text.replace(old, new, 1))
    return dest


LENGTHS = f"  lengths:\n  - {LENGTH}\n"
DATA_FILE = f"    path: data/needle_{LENGTH}.parquet\n"
CASES = [
    ("E5", LENGTHS, "  lengths:\n  - abc\n", "longctx_eval.lengths: expected a list of distinct positive whole token"),
    ("E6", LENGTHS, "  lengths:\n  - .inf\n", "got Infinity in [Infinity]"),
    ("E7", "  seed: 0\n", "  seed: xyz\n", 'longctx_eval.seed: expected an integer (the build\'s --seed), got "xyz"'),
    ("E8-configs", "configs:\n", "configs: 5\nold_configs:\n", "configs: expected a list of {config_name: NAME"),
    (
        "E8-lengths",
        LENGTHS,
        f"  lengths: {LENGTH}\n",
        f"whole token counts such as [1024, 2048], got {LENGTH}",
    ),
    (
        "E9",
        "configs:\n",
        "configs:\n- 5\n",
        "configs[0]: expected {config_name: NAME, data_files: [{split: test, path: PATH}]}, got 5",
    ),
    (
        "E11",
        DATA_FILE,
        "    path: ../../../../../etc/hostname\n",
        'data file "../../../../../etc/hostname" is outside the dataset folder',
    ),
    ("E12", LENGTHS, f"  lengths:\n  - {LENGTH}\n  - {LENGTH}.9\n", f"got {LENGTH}.9 in [{LENGTH}, {LENGTH}.9]"),
    ("twice", LENGTHS, f"  lengths:\n  - {LENGTH}\n  - {LENGTH}\n", f"got {LENGTH} twice"),
    (
        "tokenizer",
        "  tokenizer:\n",
        "  tokenizer: a-string\n  old_tokenizer:\n",
        "longctx_eval.tokenizer: expected a mapping",
    ),
]


@pytest.mark.parametrize(("old", "new", "expect"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_mistyped_card_field_is_one_line_naming_card_and_field(
    dataset: Path, tmp_path: Path, old: str, new: str, expect: str
) -> None:
    edited = _edited(dataset, tmp_path / "ds", old, new)
    with pytest.raises(ConfigError) as info:
        read_built(edited)
    text = str(info.value)
    assert len(text.splitlines()) == 1 and text.startswith(f"--dataset {edited / 'README.md'}: ")
    assert expect in text, text


def test_the_unedited_card_reads_as_built(dataset: Path) -> None:
    built = read_built(dataset)
    assert built.builder == "needle" and built.lengths == (LENGTH,) and built.seed == 0
    assert built.parquet_of(LENGTH) == (dataset / f"data/needle_{LENGTH}.parquet").resolve()


def test_end_to_end_mistyped_length_is_exit_2_one_line(dataset: Path, tmp_path: Path) -> None:
    """The campaign's reproduction (E5) through the CLI: exit 2, one line, no traceback, nothing written."""
    edited = _edited(dataset, tmp_path / "ds", LENGTHS, "  lengths:\n  - abc\n")
    cli = "import sys; from longctx_eval.cli import main; sys.exit(main())"
    cmd = [
        sys.executable,
        "-c",
        cli,
        "export",
        "lm-eval",
        "needle",
        "--dataset",
        str(edited),
        "--out",
        str(tmp_path / "t"),
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"{edited / 'README.md'}: longctx_eval.lengths: expected a list" in line and 'got "abc"' in line
    assert not (tmp_path / "t").exists()


# --- hypothesis: mutated front matter through the reader and both writers ----------------------------------------

YAML = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**20), max_value=10**20),
        st.floats(),
        st.text(max_size=8),
        st.sampled_from(["../../etc/hostname", "/etc/hostname", f"data/needle_{LENGTH}.parquet", "data", "", LENGTH]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(st.text(max_size=4), st.sampled_from(["path", "config_name", "name"])), inner, max_size=3
        ),
    ),
    max_leaves=5,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [prefix, *(p for k, v in items for p in _paths(v, (*prefix, k)))]


@st.composite
def _card(draw: st.DrawFn, text: str) -> str:
    """`text` (a card) with one front-matter value replaced or removed, text spliced in, or cut short."""
    _, head, body = text.split("---\n", 2)
    kind = draw(st.sampled_from(["value", "value", "drop", "splice", "cut"]))
    if kind == "cut":
        return text[: draw(st.integers(0, len(head) + 8))]
    if kind == "splice":
        at = draw(st.integers(0, len(head) + 4))
        return text[:at] + draw(st.text(max_size=12)) + text[at:]
    meta = copy.deepcopy(yaml.safe_load(head))
    places = [p for p in _paths(meta) if p[:1] != ("dataset_info",)]  # the features: many places, never read
    path = draw(st.sampled_from(places[1:] if kind == "drop" else places))
    if not path:
        meta = draw(YAML)
    else:
        parent = meta
        for key in path[:-1]:
            parent = parent[key]
        if kind == "drop":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(YAML)
    return "---\n" + yaml.safe_dump(meta, allow_unicode=True) + "---\n" + body


def test_mutated_cards_give_an_export_or_one_line(dataset: Path, tmp_path: Path) -> None:
    info, target = export_target("needle")
    text = (dataset / "README.md").read_text()
    folders = itertools.count()

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_card(text))
    def mutated(card: str) -> None:
        folder = tmp_path / f"d{next(folders)}"
        shutil.copytree(dataset, folder)
        (folder / "README.md").write_text(card, encoding="utf-8", errors="surrogatepass")
        try:
            built = read_built(folder)
            check_dataset(target, built)
            write_lm_eval(target, built, info.version, folder / "lm")
            write_inspect(target, built, info.version, folder / "task.py")
        except LongctxError as exc:
            assert len(str(exc).splitlines()) == 1, repr(str(exc))
        else:
            assert all(
                (folder / p).resolve().is_relative_to(folder.resolve()) for ps in built.data_files.values() for p in ps
            )
        shutil.rmtree(folder)

    mutated()
