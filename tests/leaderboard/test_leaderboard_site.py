"""The static leaderboard site (`leaderboard --site`): built from the committed run copies, read in Chromium.

The browser test starts Debian's headless chromium through its chromedriver (selenium): every page loads
without console errors, every link and image resolves inside the site, sorting a column reorders the rows.
It is skipped, saying why, where chromium, its driver or selenium is missing (`make test` installs them as root).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
from headless_chromium import browser  # tests/leaderboard is on sys.path

from longctx_eval.leaderboard.build import find_run_files, update_leaderboard
from longctx_eval.leaderboard.grid import task_names
from longctx_eval.leaderboard.heatmaps import plot_filename
from longctx_eval.leaderboard.merge import merge_board
from longctx_eval.leaderboard.site import SiteInput, write_site
from longctx_eval.results import read_run
from longctx_eval.scoring.comparison import p_text
from longctx_eval.scoring.paired_tests import CLUSTER_SIGN_FLIP, sign_flip

ROOT = Path(__file__).resolve().parents[2]
BOARD = ROOT / "leaderboards"
HOSTILE = '<script>alert("x")</script> & <b>bold</b>'


def _hostile_run(tmp: Path) -> Path:
    """A committed bm25 run copy renamed to a model name full of HTML, with a skip reason full of HTML."""
    source = sorted((BOARD / "runs").glob("bm25__*.json"))[-1]
    data = json.loads(source.read_bytes())
    data["model"]["name"] = HOSTILE
    data["skipped"] = [{"task": "coref_litbank", "reason": f"refused: {HOSTILE}", "kind": "capability"}]
    path = tmp / "hostile.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of every committed run copy plus a hostile-named one, with the committed plots."""
    tmp = tmp_path_factory.mktemp("site")
    files = [*find_run_files([BOARD / "runs"]), _hostile_run(tmp)]
    merged = merge_board([read_run(p) for p in files], [p.name for p in files])
    entries = merged.entries
    plots: dict[str, list[Path]] = {}
    for task in task_names(entries):
        stem = plot_filename(task).removesuffix(".png")
        heat = BOARD / "plots" / plot_filename(task)
        extra = sorted((BOARD / "plots").glob(f"{stem}.*.png"))
        plots[task] = [heat] * heat.is_file() + extra
    runs = {read_run(p).model.name: p for p in files}
    out = tmp / "site"
    write_site(SiteInput(entries, "2026-12-01T00:00:00+00:00", plots, runs, merged.notes), out)
    return out


RETRIEVAL_RUN = ["--tasks", "retrieval", "--lengths", "2048,8192", "--seed", "3"]
RETRIEVAL_RUN += ["--task-arg", "retrieval.topics=3", "--task-arg", "retrieval.source=synthetic"]


@pytest.fixture(scope="module")
def compare_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site from real run folders: bm25 and the oracle on retrieval (2K, 8K), and a copy of bm25's folder
    under another name whose 8K samples claim other haystacks (their context sha256 changed), same ids."""
    from longctx_eval.cli import main

    tmp = tmp_path_factory.mktemp("compare")
    runs = tmp / "runs"
    for model in ("bm25", "oracle"):
        assert main(["run", "--model", model, *RETRIEVAL_RUN, "--out", str(runs)]) == 0
    moved = runs / "bm25-moved"
    shutil.copytree(runs / "bm25", moved)
    run = json.loads((moved / "run.json").read_text())
    run["model"]["name"] = "bm25-moved"
    (moved / "run.json").write_text(json.dumps(run))
    lines = []
    for line in (moved / "samples" / "retrieval.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["id"].startswith("L8192-"):
            rec["context_sha256"] = "0" * 64
        lines.append(json.dumps(rec))
    (moved / "samples" / "retrieval.jsonl").write_text("\n".join(lines) + "\n")
    update_leaderboard([runs], tmp / "board", site=tmp / "site")
    return tmp


def _recall5(run_dir: Path) -> dict[str, float]:
    lines = (run_dir / "scores" / "retrieval.jsonl").read_text().splitlines()
    return {r["id"]: r["scores"]["recall@5"] for r in map(json.loads, lines)}


def _clusters(run_dir: Path) -> dict[str, str]:
    lines = (run_dir / "scores" / "retrieval.jsonl").read_text().splitlines()
    return {r["id"]: r["metadata"]["cluster"] for r in map(json.loads, lines)}


def _rows(html: str) -> list[list[str]]:
    import re

    table = html.split('class="sortable compare"', 1)[1]  # the first task's table, under the page's summary
    body = table.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in body.split("<tr>")[1:]]


def test_comparison_pages_pair_only_the_same_haystacks(compare_site: Path) -> None:
    """bm25 vs oracle: every query paired, the difference is the mean of the per-sample differences; the copy
    whose 8K samples name other haystacks pairs with bm25 at 2K only."""
    site = compare_site / "site"
    bm25 = _recall5(compare_site / "runs" / "bm25")
    page = (site / "compare-bm25--oracle.html").read_text()
    rows = {r[0]: r for r in _rows(page)}
    # 18 queries on 2 documents (one per length): counted, resampled and tested per document
    assert set(rows) == {"2K", "8K", "all"} and rows["all"][1] == f"{len(bm25)} over 2 clusters" == "18 over 2 clusters"
    expected = sum(v - 1.0 for v in bm25.values()) / len(bm25)
    assert rows["all"][4].startswith(f"{expected:+.3f} [")
    assert "n=9 over 1 cluster, no interval (&lt; 2 clusters)" in rows["2K"][4]  # one document: no interval
    assert rows["all"][7] == str(sum(v < 1.0 for v in bm25.values()))  # the oracle better where bm25 missed
    # the paired test and Holm's correction across the page's cells, as `longctx-eval compare` prints them
    docs = _clusters(compare_site / "runs" / "bm25")
    sums = [sum(v - 1.0 for i, v in bm25.items() if docs[i] == d) for d in sorted(set(docs.values()))]
    assert rows["all"][8] == CLUSTER_SIGN_FLIP and rows["all"][9] == p_text(sign_flip(np.array(sums)))
    assert float(rows["all"][10]) >= float(rows["all"][9])
    assert rows["all"][5] == ("yes" if float(rows["all"][10]) < 0.05 else "no")
    moved = {r[0]: r for r in _rows((site / "compare-bm25--bm25-moved.html").read_text())}
    assert set(moved) == {"2K", "all"} and moved["all"][1] == "9 over 1 cluster"
    assert moved["all"][4].startswith("+0.000 n=9 over 1 cluster, no interval")
    index = (site / "index.html").read_text()
    assert 'href="compare-bm25--oracle.html"' in index and 'href="compare-bm25--bm25-moved.html"' in index
    assert 'href="compare-bm25--oracle.html"' in (site / "model-oracle.html").read_text()


def test_site_files_and_escaping(site: Path) -> None:
    """Index, one page per task and per model, the assets; HTML text escaped; no absolute or network URL."""
    pages = sorted(site.glob("*.html"))
    assert (site / "index.html") in pages and (site / "site.css").is_file() and (site / "site.js").is_file()
    assert len(list(site.glob("task-*.html"))) >= 10 and len(list(site.glob("model-*.html"))) >= 10
    for page in pages:
        text = page.read_text()
        assert "<script>alert" not in text and "<b>bold" not in text, page.name
        assert "http://" not in text and "https://" not in text and 'src="/' not in text and 'href="/' not in text
    hostile = [p for p in pages if "&lt;script&gt;alert" in p.read_text()]
    assert (site / "index.html") in hostile and any(p.name.startswith("model-") for p in hostile)


def test_model_pages_call_a_local_folder_what_it_is(site: Path) -> None:
    """A local model's recorded revision is the folder it was loaded from; a package's is a version."""
    local = (site / "model-tiny-alibi.html").read_text()
    assert '<th scope="row">loaded from</th>' in local and '<th scope="row">revision</th>' not in local
    assert '<th scope="row">revision</th><td>bm25s==' in (site / "model-bm25.html").read_text()


def test_cli_writes_site_beside_board(tmp_path: Path) -> None:
    """`update_leaderboard(..., site=DIR)` (the CLI's --site) renders plots, copies them in, drops stale pages."""
    run = sorted((BOARD / "runs").glob("tiny-alibi__*.json"))[-1]
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "model-gone.html").write_text("a page of an earlier build")
    report = update_leaderboard([run], tmp_path / "board", site=tmp_path / "site")
    assert report.exit_code == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="model-tiny-alibi.html"' in index and 'href="task-posprobe.html"' in index
    pngs = sorted(p.name for p in (tmp_path / "site" / "plots").glob("*.png"))
    assert pngs and pngs == sorted(p.name for p in (tmp_path / "board" / "plots").glob("*.png"))
    assert 'src="plots/posprobe.png"' in (tmp_path / "site" / "task-posprobe.html").read_text()
    assert not (tmp_path / "site" / "model-gone.html").exists()


def test_model_page_shows_serving_figures() -> None:
    """A served task's latency percentiles, throughput, retries and failures on its model page.

    The committed runs hold no served model, so the serving section is computed by the real summary
    (`scoring/latency.py`) from request records written here (what a served run's predictions carry)."""
    from longctx_eval.leaderboard.model_page import model_page
    from longctx_eval.leaderboard.pages import BoardInput
    from longctx_eval.leaderboard.site_html import Links, page_html
    from longctx_eval.results import ServingStats
    from longctx_eval.scoring.latency import serving_section

    records = [
        {
            "data": {
                "serving": {
                    "ok": True,
                    "ttft_s": 0.1 * i,
                    "e2e_s": 0.5 * i,
                    "completion_tokens": 10,
                    "prompt_tokens": 100,
                    "attempts": 1 + (i == 3),
                    "retries_by_reason": {"429": 1} if i == 3 else {},
                    "started": float(i),
                    "finished": i + 0.5 * i,
                    "itl_s": [0.01, 0.02],
                }
            }
        }
        for i in range(1, 5)
    ] + [{"data": {"serving": {"ok": False, "error_kind": "5xx", "attempts": 3, "started": 9.0, "finished": 9.5}}}]
    stats = ServingStats.model_validate(serving_section(records))
    run = read_run(sorted((BOARD / "runs").glob("smollm2-135m__*.json"))[-1])
    task = run.tasks[0].model_copy(update={"serving": stats})
    run = run.model_copy(update={"tasks": [task, *run.tasks[1:]]})
    html = page_html(model_page(run, BoardInput([run], "now")), Links({}, {}, {}, {}))
    assert "5 requests, 4 ok, 1 failed (5xx 1), 1 retries (429 1)" in html
    assert f">{stats.ttft_s.p95:.4g}<" in html and f">{stats.e2e_s.p99:.4g}<" in html
    assert "last token, end to end (s)" in html


LINKS_JS = """
return Array.from(document.querySelectorAll('a[href], img[src], link[href], script[src]')).map(e => [
  e.tagName, e.href || e.src, e.tagName === 'IMG' ? (e.complete && e.naturalWidth > 0) : true]);
"""


def test_site_in_headless_chromium(site: Path, compare_site: Path, tmp_path: Path) -> None:
    """Every page: no console error, every link/image inside the site and present; sorting reorders rows."""
    webdriver, options, service = browser()
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=service)
    pages = sorted(site.glob("*.html")) + sorted((compare_site / "site").glob("*.html"))
    links = images = sorts = reordered = 0
    try:
        for page in pages:
            driver.get(page.as_uri())
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert not errors, (page.name, errors)
            for tag, url, loaded in driver.execute_script(LINKS_JS):
                parsed = urlparse(url)
                if parsed.scheme == "data":
                    continue
                assert parsed.scheme == "file", (page.name, url)
                target = Path(unquote(parsed.path))
                assert target.is_file() and page.parent in target.parents, (page.name, url)
                if parsed.fragment:
                    assert f'id="{parsed.fragment}"' in target.read_text(), (page.name, url)
                links += tag != "IMG"
                images += tag == "IMG"
                assert loaded, (page.name, "image did not load", url)
            if page.name.startswith(("task-", "compare-")):
                s, r = _check_sorting(driver, page.name)
                sorts, reordered = sorts + s, reordered + r
        _screenshots(driver, site, tmp_path)
    finally:
        driver.quit()
    print(
        f"site browser check: {len(pages)} pages, {links} links, {images} images, "
        f"{sorts} sort checks ({reordered} reordered)"
    )
    assert len(pages) >= 20 and links >= 100 and images >= 20
    assert sorts >= 20 and reordered >= 1


COLUMN_JS = """
const table = document.querySelector('table.board, table.compare');
return Array.from(table.tBodies[0].rows).map(r => {
  const c = r.cells[arguments[0]];
  return [r.cells[0].textContent, c.hasAttribute('data-sort') ? Number(c.getAttribute('data-sort')) : null];
});
"""


def _check_sorting(driver, page: str) -> tuple[int, int]:  # noqa: ANN001 - selenium's driver
    """Click each numeric column of the task's board twice: high first, then low first, unscored rows last."""
    from selenium.webdriver.common.by import By

    tables = driver.find_elements(By.CSS_SELECTOR, "table.board, table.compare")
    if not tables:
        return 0, 0
    buttons = tables[0].find_elements(By.CSS_SELECTOR, "thead th button")
    checks = reordered = 0
    for column in range(1, len(buttons)):
        before = driver.execute_script(COLUMN_JS, column)
        if len(before) < 2 or sum(v is not None for _, v in before) < 2:
            continue
        for descending in (True, False):
            driver.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center'})", buttons[column])
            buttons[column].click()
            after = driver.execute_script(COLUMN_JS, column)
            values = [v for _, v in after if v is not None]
            assert values == sorted(values, reverse=descending), (page, column, after)
            assert all(v is None for _, v in after[len(values) :]), (page, column, after)
            assert sorted(m for m, _ in after) == sorted(m for m, _ in before)
            state = buttons[column].find_element(By.XPATH, "..").get_attribute("aria-sort")
            assert state == ("descending" if descending else "ascending")
            reordered += [m for m, _ in after] != [m for m, _ in before]
            before = after
            checks += 1
    return checks, reordered


def _screenshots(driver, site: Path, tmp_path: Path) -> None:  # noqa: ANN001 - selenium's driver
    """Full-page screenshots of the index and a model page: PNGs with many colours, not a blank page."""
    from PIL import Image

    for name in ("index.html", "model-smollm2-135m.html"):
        driver.get((site / name).as_uri())
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, min(height + 100, 4000))
        shot = tmp_path / f"{name}.png"
        driver.save_screenshot(str(shot))
        with Image.open(shot) as image:
            colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50, name
        assert max(n for n, _ in colours) < 0.97 * sum(n for n, _ in colours), f"{name} is nearly blank"
