"""A real headless Chromium for tests that open a page (Debian's chromium + chromium-driver).

Use it from a test module:

    from browser import browser  # noqa: F401  (the fixture)

    @pytest.mark.browser
    def test_page(browser):
        browser.open(path)                      # a local file, waits for the load
        browser.find_all("section.row")         # selenium WebElements
        browser.screenshot("page")              # -> out/test-artifacts/page.png, kept
        assert browser.console_errors() == []   # console errors and failed loads since open()

Without chromium, chromedriver or selenium the test is skipped with the reason; where
DDPBENCH_REQUIRE_BROWSER=1 (CI, `.ci/run`) the fixture fails instead, so CI cannot pass by
skipping. Selenium is given both binaries, so Selenium Manager never downloads anything.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "out" / "test-artifacts"
REQUIRED = "DDPBENCH_REQUIRE_BROWSER"
WINDOW = (1600, 1000)
# Root in a container: no sandbox; no GPU, no /dev/shm, nothing fetched from the network.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)


def missing() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install '.[test]')"
    for program, package in (("chromium", "chromium"), ("chromedriver", "chromium-driver")):
        if not shutil.which(program):
            return f"{program} is not installed (apt-get install {package})"
    return None


@dataclass
class Browser:
    """One headless Chromium window; `driver` is the selenium WebDriver for anything else."""

    driver: Any

    def open(self, path: Path) -> None:
        """Load a local file and wait until it has loaded."""
        self.driver.get(Path(path).resolve().as_uri())

    def find_all(self, css: str) -> list[Any]:
        """The elements that match a CSS selector."""
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads since the last call."""
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry["level"] == "SEVERE"
        ]

    def screenshot(self, name: str, full_page: bool = False) -> Path:
        """A PNG of the window (or the whole page) kept in out/test-artifacts/NAME.png."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        if full_page:
            size = self.driver.execute_script(
                "return [document.documentElement.scrollWidth,"
                " document.documentElement.scrollHeight]"
            )
            shot = self.driver.execute_cdp_cmd(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1},
                },
            )
            path.write_bytes(base64.b64decode(shot["data"]))
        else:
            self.driver.save_screenshot(str(path))
        return path

    def pdf(self, name: str) -> Path:
        """The page printed (print style sheet) to out/test-artifacts/NAME.pdf."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        printed = self.driver.execute_cdp_cmd(
            "Page.printToPDF", {"preferCSSPageSize": True, "printBackground": True}
        )
        path = ARTIFACTS / f"{name}.pdf"
        path.write_bytes(base64.b64decode(printed["data"]))
        return path


def skip_or_fail_without_a_browser() -> None:
    """Skip the test (with the reason) where no browser can run; fail instead in CI."""
    reason = missing()
    if reason:
        if os.environ.get(REQUIRED) == "1":
            pytest.fail(f"{REQUIRED}=1 but {reason}")
        pytest.skip(reason)


@pytest.fixture
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """A fresh headless Chromium (own profile folder), quit after the test."""
    skip_or_fail_without_a_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(
        options=options, service=Service(executable_path=shutil.which("chromedriver"))
    )
    try:
        driver.set_page_load_timeout(60)
        yield Browser(driver)
    finally:
        driver.quit()
