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

import pytest

from longctx_eval.leaderboard import find_run_files, update_leaderboard
from longctx_eval.leaderboard_merge import merge_board
from longctx_eval.leaderboard_render import task_names
from longctx_eval.leaderboard_site import SiteInput, write_site
from longctx_eval.plots import plot_filename
from longctx_eval.results import read_run

ROOT = Path(__file__).resolve().parents[1]
BOARD = ROOT / "leaderboards"
HOSTILE = '<script>alert("x")</script> & <b>bold</b>'
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


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
    (`metrics/latency.py`) from request records written here (what a served run's predictions carry)."""
    from longctx_eval.leaderboard_site import Links, model_page
    from longctx_eval.metrics.latency import serving_section
    from longctx_eval.results import ServingStats

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
    site = SiteInput([run], "now", {}, {})
    html = model_page(run, site, Links({}, {}, {}, {}))
    assert "5 requests, 4 ok, 1 failed (5xx 1), 1 retries (429 1)" in html
    assert f">{stats.ttft_s.p95:.4g}<" in html and f">{stats.e2e_s.p99:.4g}<" in html
    assert "last token, end to end (s)" in html


def _browser():  # noqa: ANN202 - selenium's driver type is only importable when selenium is
    if CHROMIUM is None or DRIVER is None:
        pytest.skip("chromium or chromedriver not installed (apt-get install chromium chromium-driver; make test does)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (the dev extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    return webdriver, options, Service(DRIVER)


LINKS_JS = """
return Array.from(document.querySelectorAll('a[href], img[src], link[href], script[src]')).map(e => [
  e.tagName, e.href || e.src, e.tagName === 'IMG' ? (e.complete && e.naturalWidth > 0) : true]);
"""


def test_site_in_headless_chromium(site: Path, tmp_path: Path) -> None:
    """Every page: no console error, every link/image inside the site and present; sorting reorders rows."""
    webdriver, options, service = _browser()
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=service)
    pages = sorted(site.glob("*.html"))
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
                assert target.is_file() and site in target.parents, (page.name, url)
                if parsed.fragment:
                    assert f'id="{parsed.fragment}"' in target.read_text(), (page.name, url)
                links += tag != "IMG"
                images += tag == "IMG"
                assert loaded, (page.name, "image did not load", url)
            if page.name.startswith("task-"):
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
const table = document.querySelector('table.board');
return Array.from(table.tBodies[0].rows).map(r => {
  const c = r.cells[arguments[0]];
  return [r.cells[0].textContent, c.hasAttribute('data-sort') ? Number(c.getAttribute('data-sort')) : null];
});
"""


def _check_sorting(driver, page: str) -> tuple[int, int]:  # noqa: ANN001 - selenium's driver
    """Click each numeric column of the task's board twice: high first, then low first, unscored rows last."""
    from selenium.webdriver.common.by import By

    tables = driver.find_elements(By.CSS_SELECTOR, "table.board")
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
