"""A real ``josefk console`` process and a real headless browser, for the console's tests.

Owns ``ConsoleProcess`` (``python -m josefk console --listen 127.0.0.1:0`` from this
checkout; ready once it printed its URL), ``start_browser`` (Debian's chromium driven through
chromium-driver by selenium, with the browser's console log kept; skips the test with the
reason when either is missing), ``browser_errors`` (the browser console's errors since the
last call), ``screenshot`` (PNG files under ``.test-artifacts/console/`` of the checkout, or
``JOSEFK_TEST_ARTIFACTS``; gitignored) and ``wait_until`` (poll a condition with a deadline).

Must not import josefk: the console is driven through its process and a browser.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from broker_process import SOURCE_DIR

T = TypeVar("T")

START_TIMEOUT_S = 60.0
WAIT_S = 30.0
URL_PATTERN = re.compile(r"^josefk console: (?P<url>http://\S+/) ")

ARTIFACTS = (
    Path(os.environ.get("JOSEFK_TEST_ARTIFACTS") or SOURCE_DIR / ".test-artifacts").resolve()
    / "console"
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
)


class ConsoleProcess:
    """``josefk console`` against ``bootstrap`` on a free port; ``url`` once started."""

    def __init__(self, bootstrap: str, log_path: Path, *, extra_args: Sequence[str] = ()) -> None:
        self.bootstrap = bootstrap
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ConsoleProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOSEFK_")}
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = str(SOURCE_DIR)
        command = [
            sys.executable, "-m", "josefk", "console",
            "-b", self.bootstrap, "--listen", "127.0.0.1:0", *self.extra_args,
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        self._proc = proc
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                lines.put(raw.decode(errors="replace").rstrip("\n"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            match = URL_PATTERN.match(line)
            if match:
                self.url = match["url"].rstrip("/")
                return self
        self.close()
        raise RuntimeError(f"josefk console did not start; see {self.log_path}:\n{self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-40:])
        except OSError:
            return ""

    def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self._proc = None


def start_browser() -> Any:
    """A headless chromium through chromium-driver; skips when either is absent."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "the console's browser tests need Debian's chromium and chromium-driver "
            "(./scripts/test.sh installs them)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    return driver


def browser_errors(driver: Any, *, allow: Sequence[str] = ()) -> list[str]:
    """The browser console's SEVERE entries since the last call, less those containing one
    of ``allow`` (a refusal the test asked for is logged by chromium as a failed load)."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry.get("level") == "SEVERE" and not any(a in entry["message"] for a in allow)
    ]


def screenshot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def wait_until(what: str, probe: Callable[[], T | bool | None], timeout: float = WAIT_S) -> T:
    """Poll ``probe`` until it returns something truthy; its last exception or a timeout
    fails with ``what``."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = probe()
            if value:
                return value  # type: ignore[return-value]
        except Exception as exc:  # noqa: BLE001  a page half rendered: try again until the deadline
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f": {last!r}" if last else ""))
        time.sleep(0.1)
