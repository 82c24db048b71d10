"""Take the README's screenshots of the web console (docs/img/console-*.png).

Starts one ``josefk serve`` on a free loopback port with its data in a temporary folder, a few
topics, a producer whose rate rises and falls, a consumer group ``billing`` that falls behind
and then catches up (so its lag chart has a shape), two more groups, and the console (in this
process, sampling every two seconds); after ``--seconds`` it opens the overview and billing's
page in headless chromium (Debian's chromium and chromium-driver) and saves them.

    .venv/bin/python scripts/console_screenshots.py [--seconds 100] [--out docs/img]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from josefk.client import AIOAdmin, AIOConsumer, AIOProducer, NewTopic, TopicPartition  # noqa: E402
from josefk.console.app import ConsoleSettings, build_app  # noqa: E402


def start_broker(data: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "josefk", "serve", "--listen", "127.0.0.1:0",
         "--data-dir", str(data), "--metrics-port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )  # fmt: skip
    assert process.stdout is not None
    match = re.search(r"listening on \w+://([^:]+):(\d+)", process.stdout.readline())
    assert match, "the broker did not start"
    return process, f"{match.group(1)}:{match.group(2)}"


async def produce(bootstrap: str, stop: asyncio.Event) -> None:
    producer = AIOProducer(bootstrap_servers=bootstrap, linger_ms=10)
    await producer.start()
    started = time.monotonic()
    n = 0
    try:
        while not stop.is_set():
            elapsed = time.monotonic() - started
            rate = 300 + 220 * math.sin(elapsed / 12)  # records per second to orders
            for _ in range(int(rate / 10)):
                n += 1
                order = {"order_id": n, "customer": f"c-{random.randrange(500)}",
                         "amount": round(random.uniform(5, 200), 2), "currency": "EUR"}  # fmt: skip
                await producer.send("orders", json.dumps(order).encode(), f"c-{n % 500}".encode())
                if n % 4 == 0:
                    await producer.send(
                        "payments", json.dumps({"order_id": n, "ok": True}).encode()
                    )
            await asyncio.sleep(0.1)
    finally:
        await producer.close()


async def consume(
    bootstrap: str, group: str, stop: asyncio.Event, rate_of: Callable[[float], float]
) -> None:
    consumer = AIOConsumer(
        "orders", bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        auto_commit_interval_ms=1000,
    )  # fmt: skip
    await consumer.start()
    started = time.monotonic()
    try:
        while not stop.is_set():
            limit = rate_of(time.monotonic() - started)
            await consumer.getmany(timeout_ms=100, max_records=max(1, int(limit / 10)))
            await asyncio.sleep(0.1)
    finally:
        await consumer.close()


def screenshots(url: str, out: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                "--force-device-scale-factor=1", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        for path, name, ready in (
            ("/", "console-overview.png", "#chart-records path.line"),
            ("/groups/billing", "console-group-lag.png", "#chart-lag path.line"),
        ):
            driver.get(url + path)
            deadline = time.monotonic() + 20
            while not driver.find_elements("css selector", ready) and time.monotonic() < deadline:
                time.sleep(0.1)
            driver.save_screenshot(str(out / name))
            print(f"saved {out / name}")
    finally:
        driver.quit()


async def main(seconds: float, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="console-shots-") as tmp:
        broker, bootstrap = start_broker(Path(tmp) / "data")
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        runner: web.AppRunner | None = None
        try:
            async with AIOAdmin(bootstrap_servers=bootstrap) as admin:
                await admin.create_topics(
                    [NewTopic("orders", 6, 1), NewTopic("payments", 3, 1),
                     NewTopic("clicks", 3, 1), NewTopic("inventory", 1, 1)]
                )  # fmt: skip
                await admin.alter_group_offsets("audit", {TopicPartition("orders", 0): 0})
            app = build_app(ConsoleSettings(bootstrap=bootstrap, interval=2.0, history_samples=90))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            url = f"http://127.0.0.1:{runner.addresses[0][1]}"
            print(f"console at {url}, broker at {bootstrap}; running {seconds:.0f}s")
            tasks = [
                asyncio.ensure_future(produce(bootstrap, stop)),
                # billing falls behind for a minute, then catches up at twice the rate.
                asyncio.ensure_future(
                    consume(bootstrap, "billing", stop, lambda t: 150 if t < 55 else 900)
                ),
                asyncio.ensure_future(consume(bootstrap, "analytics", stop, lambda t: 2000)),
            ]
            await asyncio.sleep(seconds)
            await asyncio.to_thread(screenshots, url, out)
        finally:
            stop.set()
            for task in tasks:
                with contextlib.suppress(Exception):
                    await task
            if runner is not None:
                await runner.cleanup()
            broker.terminate()
            broker.wait(timeout=60)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(args.seconds, args.out))
