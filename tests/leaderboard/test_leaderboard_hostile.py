"""Hostile values in run files stay text in every output of `leaderboard` (issue 39, cause 1; campaign
review-2026-12b S7 and S-a).

Values full of HTML, Markdown and rich markup are written into real run files (copies of one small bm25 run) in
every text field a board shows: model name, spec, kind, revision, dtype, tokenizer, settings, window source,
platform, suite, task name, version and arguments, metric, slice keys and values, contrasts, curves, failure,
warning and skip reasons, served failure kinds and composite metrics; beside them an unfinished run folder and a
corrupt run file in folders named by values, and two run files whose names the board cannot name files after (S-a).
The property test reads LEADERBOARD.md as markdown-it-py renders it (CommonMark with tables and raw HTML allowed),
leaderboard.json, every site page and the console; the browser test opens the rendered Markdown and the site in
headless chromium with a beacon that counts every request a value could make.
"""

from __future__ import annotations

import gzip
import html
import json
import re
import shutil
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from headless_chromium import browser  # tests/leaderboard is on sys.path
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt  # markdown-it-py, installed with rich

from longctx_eval.cli import main
from longctx_eval.results import ServingStats
from longctx_eval.scoring.composite import composite_score
from longctx_eval.scoring.latency import serving_section

PAYLOADS = [
    "<script>document.title='PWNED'</script>",
    "<img src=x onerror=alert(1)>",
    '"><svg onload="alert(1)">',
    "' onmouseover='alert(1)",
    "javascript:alert(1)",
    "[x](javascript:alert(1))",
    "![i](javascript:alert(1))",
    "<a href=javascript:alert(1)>a</a>",
    "&lt;b&gt;",
    "&#60;script&#62;",
    "| a | b |",
    "\n\n| x |\n|---|",
    "**b**",
    "_i_",
    "`c`",
    "~~s~~",
    "\\",
    "<!--",
    "[bold]",
    "[/]",
    "[/bold]",
    "[link=https://x]y[/link]",
    ":warning:",
    "$x^2$",
    "# h",
]
"""Fragments of hostile values: HTML and attributes, links, entities, table and emphasis breakers, rich markup,
emoji codes, matplotlib math."""
HOSTILE = (
    st.lists(
        st.sampled_from(PAYLOADS) | st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=3),
        min_size=1,
        max_size=4,
    )
    .map("".join)
    .filter(lambda text: text.strip() not in ("", ".", ".."))
)
MD_TAGS = {"h1", "h2", "p", "table", "thead", "tbody", "tr", "th", "td", "strong", "em", "code", "img", "a"}
MD_TAGS |= {"ul", "li"}
SITE_TAGS = {"html", "head", "meta", "title", "link", "body", "header", "nav", "main", "footer", "script"}
SITE_TAGS |= MD_TAGS | {"h3", "tfoot", "button", "details", "summary", "figure", "figcaption", "pre", "div", "span"}
SITE_ATTRS = {"href", "src", "alt", "class", "type", "scope", "lang", "charset", "name", "content", "rel"}
SITE_ATTRS |= {"data-sort", "data-type"}
SETTLE_S = 0.3
"""How long the browser test stays on a page for requests its load started to reach the beacon."""
LOCAL_LINK = re.compile(r"(?:[A-Za-z0-9._-]+\.(?:html|css|js)|(?:plots|runs)/[A-Za-z0-9._-]+\.(?:png|json)|data:,)")


def _clip(text: str, size: int) -> str:
    """`text` cut to at most `size` UTF-8 bytes, never inside a character."""
    return text.encode()[:size].decode(errors="ignore")


def _file_name(text: str) -> str:
    """`text` as one file name: no '/' or NUL, not hidden, at most 60 bytes."""
    return "v" + _clip(text.replace("/", "_").replace("\0", "_"), 60)


def _served(error_kind: str, recall_metric: str) -> tuple[dict, dict]:
    """A served task's `serving` and `composite` sections, computed by the real summaries from request records."""
    ok = [
        {"ok": True, "ttft_s": 0.1 * i, "e2e_s": 0.3 * i, "completion_tokens": 8, "prompt_tokens": 90, "attempts": 1}
        | {"started": float(i), "finished": 1.3 * i}
        for i in range(1, 4)
    ]
    failed = {"ok": False, "error_kind": error_kind, "attempts": 2, "started": 5.0, "finished": 6.0}
    records = [{"data": {"serving": stats}} for stats in [*ok, failed]]
    stats = ServingStats.model_validate(serving_section(records))
    assert stats.ttft_s is not None and stats.throughput.output_tokens_per_s is not None
    composite = composite_score(
        output_tokens_per_s=stats.throughput.output_tokens_per_s,
        latency_p95_s=stats.ttft_s.p95,
        recall=1.0,
        recall_metric=recall_metric,
        fidelity=0.5,
        fidelity_n=3,
    )
    return stats.model_dump(mode="json"), composite.model_dump(mode="json")


def write_hostile_inputs(base: Path, out: Path, value: Callable[[str], str]) -> dict[str, str]:
    """Under `out`: three copies of the run folder `base` with `value(field)` in every text field (model names
    ' #1', ' #2', ' #3' added; the third's task and primary metric are values too), an unfinished run folder, a
    corrupt run file, and two run files the board cannot name files after (S-a). Returns the model names and
    folder names used."""
    names = {f"model{i}": _clip(value("name"), 90) + f" #{i}" for i in (1, 2, 3)}
    for i in (1, 2, 3):
        folder = out / f"run{i}"
        shutil.copytree(base, folder)
        run = json.loads((folder / "run.json").read_text())
        model = run["model"]
        model.update(name=names[f"model{i}"], spec=value("spec"), kind=value("kind"), revision=value("revision"))
        model.update(dtype=value("dtype"), tokenizer=value("tokenizer"), settings={value("setting"): value("setting")})
        model.update(context_window=4096, runtime={"window": {"tokens": 4096, "source": value("window")}})
        run["environment"]["platform"] = value("platform")
        run["suite"]["version"] = value("suite")
        task = run["tasks"][0]
        key = _clip(value("slice_key"), 60)
        for row in task["slices"]:
            row["slice"] = {key: value("slice_value") + str(row["slice"][next(iter(row["slice"]))])}
        task.update(version=value("version"), args={value("arg"): value("arg")}, warnings=[value("warning")])
        task.update(failures={value("failure"): 1}, length_args={"1024": {"per_cell": value("arg")}})
        task["contrasts"] = [
            {"name": value("contrast"), "metric": "recall@1", "key": key, "a": value("slice_value"), "b": "other",
             "length": None, "value_a": 1.0, "n_a": 2, "value_b": 0.5, "n_b": 2, "difference": 0.5, "ci95": [0.0, 1.0]}
        ]  # fmt: skip
        task["curves"] = [
            {"name": _clip(value("curve"), 60), "length": None, "x_label": value("curve"), "y_label": value("curve"),
             "points": [{"x": float(x), "value": 0.5 + 0.1 * x, "n": 4, "ci95": [0.4, 0.9]} for x in (1, 2, 3)]}
        ]  # fmt: skip
        task["serving"], task["composite"] = _served(value("error_kind"), value("metric"))
        run["skipped"] = [{"task": value("skip_task"), "reason": value("skip_reason"), "kind": value("skip_kind")}]
        if i == 3:  # a task and a primary metric named by values (a task name holds no '/': S-a skips those)
            task["name"] = _clip(value("task").replace("/", "_").replace("\\", "_").replace("\0", "_"), 60)
            for row in task["results"] + task["slices"]:
                row["metric"] = value("metric") if row["metric"] == "recall@1" else row["metric"]
        (folder / "run.json").write_text(json.dumps(run))
    unfinished = out / _file_name(value("folder"))
    unfinished.mkdir(exist_ok=True)
    (unfinished / "manifest.json").write_text(json.dumps({"tasks": {value("manifest_task"): {"status": "running"}}}))
    corrupt = out / (_file_name(value("folder")) + " corrupt")
    corrupt.mkdir()
    (corrupt / "run.json").write_text('{"model": ' + json.dumps(value("name"))[:-1])
    for label, edit in (("long", {"name": "L" * 5000}), ("slash", None)):
        run = json.loads((base / "run.json").read_text())
        if edit:
            run["model"].update(edit)
        else:
            run["tasks"][0]["name"] = "<img src=x onerror=alert(1)>/" + value("task")
        (out / label).mkdir()
        (out / label / "run.json").write_text(json.dumps(run))
    return {**names, "unfinished": unfinished.name, "corrupt": corrupt.name}


@pytest.fixture(scope="module")
def bm25_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real bm25 run folder: needle at 1K, 4 samples (run.json, samples/, scores/)."""
    out = tmp_path_factory.mktemp("bm25")
    args = ["run", "--model", "bm25", "--tasks", "needle", "--lengths", "1024", "--limit", "4", "--out", str(out)]
    assert main(args) == 0
    return out / "bm25"


class Page(HTMLParser):
    """Every start tag with its attributes, the text of each table cell, and text inside <script>."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.tables: list[list[list[str]]] = []
        self.script_text = ""
        self._cell: list[str] | None = None
        self._open: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._open.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._open and self._open[-1] == "script":
            self.script_text += data


def render_markdown(text: str) -> str:
    """LEADERBOARD.md as a CommonMark renderer with tables shows it (raw HTML passed through, as CommonMark allows)."""
    return MarkdownIt("commonmark").enable("table").render(text)


def table_rows(markdown: str) -> Iterator[tuple[int, str]]:
    """Per Markdown table line its cell count, by GFM's rule: a pipe right after a backslash is text."""
    for line in markdown.splitlines():
        if line.startswith("|"):
            yield len(re.findall(r"(?<!\\)\|", line)) - 1, line


def assert_markdown_inert(markdown: str, models: list[str]) -> Page:
    """No tag of a value in LEADERBOARD.md, raw or as CommonMark renders it (only the page's own elements, its
    own plot and run-file links); every table row exactly as wide as its header; each model name shown whole, as
    its text, in a table cell. Returns the rendered page."""
    assert not re.search(r"<(?:script|img|svg|a|iframe|b)\b", markdown, re.I)
    page = Page(render_markdown(markdown))
    for tag, attrs in page.tags:
        assert tag in MD_TAGS, (tag, attrs)
        if tag == "img":
            assert set(attrs) == {"src", "alt"} and re.fullmatch(r"plots/[A-Za-z0-9._-]+\.png", attrs["src"] or "")
        elif tag == "a":
            assert set(attrs) == {"href"} and re.fullmatch(r"runs/[A-Za-z0-9._-]+\.json", attrs["href"] or "")
        else:
            assert not attrs or (tag in ("th", "td") and set(attrs) == {"style"}), (tag, attrs)
    for block in re.split(r"\n(?!\|)", markdown):  # a line, then the table under it (if any)
        widths = {cells for cells, _ in table_rows(block)}
        assert len(widths) <= 1, block
    shown = {cell for table in page.tables for row in table for cell in row}
    for name in models:
        assert " ".join(name.split()) in shown, name
    return page


def assert_site_inert(site: Path, models: list[str]) -> int:
    """Every page: only the site's own tags and attributes, links to its own files, one script (site.js), tables
    as wide as their header; each model's page titled with its name. Returns the pages read."""
    pages = sorted(site.glob("*.html"))
    for path in pages:
        page = Page(path.read_text())
        for tag, attrs in page.tags:
            assert tag in SITE_TAGS and set(attrs) <= SITE_ATTRS, (path.name, tag, attrs)
            for key in ("href", "src"):
                if key in attrs:
                    assert LOCAL_LINK.fullmatch(attrs[key] or ""), (path.name, tag, attrs)
            if tag == "script":
                assert attrs == {"src": "site.js"}, (path.name, attrs)
        assert not page.script_text.strip(), path.name
        for table in page.tables:
            assert len({len(row) for row in table}) == 1, (path.name, table)
    titles = {_title(p) for p in pages if p.name.startswith("model-")}
    assert titles == {f"{' '.join(n.split())} · longctx-eval" for n in models}
    return len(pages)


def _title(path: Path) -> str:
    found = re.search(r"<title>(.*?)</title>", path.read_text(), re.S)
    return " ".join(html.unescape(found.group(1)).split()) if found else ""


@settings(
    max_examples=5,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),  # no shrinking: each example builds a whole board
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(values=st.lists(HOSTILE, min_size=4, max_size=4))
def test_hostile_values_stay_text_in_every_output(
    bm25_run: Path, capsys: pytest.CaptureFixture[str], values: list[str]
) -> None:
    """Markdown rendered by CommonMark: no tag or attribute of a value, tables keep their columns, names whole;
    leaderboard.json holds the values as they were; the site: only its own markup; the console prints the values
    as text; the bad run files are skipped and listed, the rest merged."""

    def value(field: str) -> str:  # each field takes one of the drawn values, the same one every time
        return values[zlib.crc32(field.encode()) % len(values)]

    with tempfile.TemporaryDirectory() as tmp:
        inputs, board, site = Path(tmp) / "in", Path(tmp) / "board", Path(tmp) / "site"
        used = write_hostile_inputs(bm25_run, inputs, value)
        models = [used["model1"], used["model2"], used["model3"]]
        capsys.readouterr()
        code = main(["leaderboard", str(inputs), "--out", str(board), "--site", str(site), "--per-sample"])
        err = capsys.readouterr().err
        assert code == 2  # the corrupt file and the two S-a files are skipped, the rest merged

        page = assert_markdown_inert((board / "LEADERBOARD.md").read_text(), models)
        not_read = next(t for t in page.tables if t[0] == ["input", "why"])
        bad = ("long/run.json", "slash/run.json", f"{used['corrupt']}/run.json", used["unfinished"])
        assert sorted(row[0] for row in not_read[1:]) == sorted(" ".join(str(inputs / p).split()) for p in bad)

        data = json.loads((board / "leaderboard.json").read_text())
        assert sorted(e["model"]["name"] for e in data["entries"]) == sorted(models)
        assert {e["model"]["spec"] for e in data["entries"]} == {value("spec")}

        assert assert_site_inert(site, models) >= 5

        folder = inputs / used["unfinished"]
        assert f"not read {folder}: run folder without run.json (tasks: {value('manifest_task')} (running))" in err
        assert f"skipped {inputs / 'long' / 'run.json'}: model name 'LLLL" in err
        assert f"skipped {inputs / used['corrupt'] / 'run.json'}: " in err
        published = sorted(p.name for p in (board / "per-sample").iterdir())
        assert published == ["run1", "run2", "run3"]
        assert gzip.decompress((board / "per-sample" / "run1" / "scores" / "needle.jsonl.gz").read_bytes())


@settings(max_examples=300, deadline=None)
@given(HOSTILE, HOSTILE)
def test_the_markdown_rule_shows_a_value_as_its_text(name: str, other: str) -> None:
    """`md_text` (and `md_code`) in the board's own Markdown shapes (a bold name in a table row, a sentence):
    CommonMark renders exactly the value's text, in the cell it was put in, with no element of its own; the
    site's `md_plain` and `md_html` read the same Markdown back to that text."""
    from longctx_eval.leaderboard.markdown_escape import md_code, md_html, md_plain, md_text

    row = f"| **{md_text(name)}** | {md_text(other)} ({md_code(other)}) |"
    page = Page(render_markdown(f"| a | b |\n|---|---|\n{row}\n\nNot ranked: **{md_text(name)}**: {md_text(other)}.\n"))
    shown, expected = " ".join(name.split()), " ".join(other.split())
    assert {tag for tag, _ in page.tags} <= {"table", "thead", "tbody", "tr", "th", "td", "p", "strong", "code"}
    assert page.tables == [[["a", "b"], [shown, f"{expected} ({expected})"]]]
    assert md_plain(row) == f"| {shown} | {expected} ({expected}) |"
    assert html.unescape(re.sub(r"<[^>]+>", "", md_html(row))) == md_plain(row)


def test_one_bad_run_file_is_skipped_and_listed_and_the_board_still_builds(
    bm25_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S-a: a 5,000-character model name, a task name with '/', a 100-byte slice key: each file is skipped with a
    one-line reason, under "Not read" and on the console (exit 2, as a corrupt file); every other result merged."""
    inputs = tmp_path / "in"
    shutil.copytree(bm25_run, inputs / "good")
    hostile_task = '"><img src=x onerror="new Image().src=\'http://x/b\'">'
    edits: dict[str, Callable[[dict], None]] = {
        "long": lambda r: r["model"].update(name="L" * 5000),
        "slash": lambda r: r["tasks"][0].update(name=hostile_task),
        "slice": lambda r: r["tasks"][0]["slices"][0].update(slice={"k" * 100: "x"}),
    }
    for label, edit in edits.items():
        run = json.loads((bm25_run / "run.json").read_text())
        run["model"]["name"] = label
        edit(run)
        (inputs / label).mkdir()
        (inputs / label / "run.json").write_text(json.dumps(run))
    capsys.readouterr()
    code = main(["leaderboard", str(inputs), "--out", str(tmp_path / "board"), "--site", str(tmp_path / "site")])
    err = capsys.readouterr().err
    assert code == 2
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text())
    assert [e["model"]["name"] for e in board["entries"]] == ["bm25"]
    takes = "the board names files after it, so it takes at most"
    reasons = {
        "long": f"model name {'L' * 40 + '…'!r} is 5,000 bytes long; {takes} 100",
        "slash": f"task name {hostile_task[:40] + '…'!r} holds '/', '\\' or NUL: it cannot name a file in a run folder",
        "slice": f"slice key {'k' * 40 + '…'!r} is 100 bytes long; {takes} 64",
    }
    page = Page(render_markdown((tmp_path / "board" / "LEADERBOARD.md").read_text()))
    not_read = dict(row for row in next(t for t in page.tables if t[0] == ["input", "why"])[1:])
    assert not_read == {str(inputs / label / "run.json"): reason for label, reason in reasons.items()}
    for label, reason in reasons.items():
        assert f"skipped {inputs / label / 'run.json'}: {reason}\n" in err and len(reason) < 160
    assert (tmp_path / "site" / "model-bm25.html").is_file() and (tmp_path / "board" / "plots" / "needle.png").is_file()


# --- in a real browser ------------------------------------------------------------------------------------


class Beacon(BaseHTTPRequestHandler):
    """Serves the test's folder over loopback and counts every request for /beacon (a value's script, handler or
    image reaching out)."""

    hits: list[str] = []
    root = Path()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/beacon?"):
            Beacon.hits.append(self.path)
            self.send_response(204)
            self.end_headers()
            return
        path = (Beacon.root / self.path.split("?", 1)[0].lstrip("/")).resolve()
        if Beacon.root not in path.parents or not path.is_file():
            self.send_response(404)
            self.end_headers()
            return
        body = path.read_bytes()
        kinds = {".html": "text/html; charset=utf-8", ".css": "text/css", ".js": "text/javascript"}
        self.send_response(200)
        self.send_header("Content-Type", kinds.get(path.suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def browser_payloads(tag: str) -> list[str]:
    """What the campaign used, each reaching the beacon (/beacon) and changing the title if it ever runs."""
    run = f"document.title='PWNED-{tag}';new Image().src='/beacon?{tag}'"
    return [
        f"<script>{run}</script>",
        f'"><img src=x onerror="{run}">',
        f'\'><svg onload="{run}">',
        f"<img src=/beacon?{tag}-img>",
        f"[link](javascript:{run})",
    ]


def test_no_hostile_value_runs_script_in_chromium(bm25_run: Path, tmp_path: Path) -> None:
    """LEADERBOARD.md of hostile run files rendered by CommonMark (raw HTML allowed) and every site page, opened
    in headless chromium: no beacon hit, no title change, no element with an event handler or a javascript: link.
    The positive controls (the payloads as raw HTML, and a Markdown line with a value left unescaped, rendered the
    same way) do hit the beacon and change the title: the method sees script that runs."""
    webdriver, options, service = browser()
    fields = iter(range(1000))

    def value(field: str) -> str:
        return "".join(browser_payloads(f"{field}{next(fields)}"))  # names are cut to their byte limits

    served = tmp_path / "served"
    inputs, board, site = served / "in", served / "board", served / "site"
    write_hostile_inputs(bm25_run, inputs, value)
    assert main(["leaderboard", str(inputs), "--out", str(board), "--site", str(site)]) == 2
    markdown = (board / "LEADERBOARD.md").read_text()
    (board / "board.html").write_text(render_markdown(markdown))
    (served / "control.html").write_text("<title>control</title>" + "".join(browser_payloads("control")))
    raw_line = f"Not ranked (listed, not compared): **{browser_payloads('md-control')[1]}**: low n"
    (served / "control-md.html").write_text("<title>control</title>" + render_markdown(raw_line))

    Beacon.hits, Beacon.root = [], served.resolve()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Beacon)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    driver = webdriver.Chrome(options=options, service=service)
    pages = ["board/board.html", *(f"site/{p.name}" for p in sorted(site.glob("*.html")))]
    live_js = """return [document.title, Array.from(document.querySelectorAll('*')).filter(e =>
        Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
        document.querySelectorAll('a[href^="javascript:"], script:not([src]), svg, iframe').length]"""
    try:
        controls = {}
        for page in ("control.html", "control-md.html"):
            driver.get(f"{base}/{page}")
            time.sleep(SETTLE_S)  # a beacon image is fetched after the load event
            controls[page] = driver.execute_script("return document.title")
        for page in pages:
            driver.get(f"{base}/{page}")
            time.sleep(SETTLE_S)
            title, handlers, live = driver.execute_script(live_js)
            assert not title.startswith("PWNED") and handlers == 0 and live == 0, (page, title, handlers, live)
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    control_hits = [h for h in Beacon.hits if "control" in h]
    other_hits = [h for h in Beacon.hits if "control" not in h]
    print(f"browser check: {len(pages)} pages, {len(other_hits)} beacon hits, {len(control_hits)} control hits")
    assert controls == {"control.html": "PWNED-control", "control-md.html": "PWNED-md-control"}
    assert {h.split("?")[1] for h in control_hits} >= {"control", "control-img", "md-control"}
    assert other_hits == [] and len(pages) >= 8
