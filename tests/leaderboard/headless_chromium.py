"""Debian's headless chromium through its chromedriver (selenium), for the leaderboard's browser tests.

`browser()` skips the calling test, saying why, where chromium, its driver or selenium is missing (`make browser`
installs them as root; `make test` runs it).
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def browser() -> tuple[Any, Any, Any]:
    """(selenium.webdriver, ChromeOptions for a headless run, the driver's Service); skips when one is missing."""
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
