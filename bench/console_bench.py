"""How fast the web console's pages load against a cluster with many topics and groups.

One ``josefk serve`` (bench/serve_process.py) gets ``--topics`` topics (one partition each,
one record each) and ``--groups`` consumer groups (each with a committed offset on one of
them). The console (josefk.console's app, in this process, on loopback) samples the cluster
every ``--interval`` seconds as ``josefk console`` does. Each page is then loaded ``--rounds``
times the way a browser with a warm cache loads it: its HTML, then the ``/api/`` requests its
script makes, one after the other; the script and stylesheet once per round on top, as on a
cold cache. Figures are milliseconds of wall time per page (median and worst), beside the
baseline of one ``/static/console.css`` request (the server's floor on this machine), and the
time one background sample of the whole cluster takes. With ``--browser`` (Debian's chromium
and chromium-driver, through selenium) each page is also opened in a real headless browser and
timed from the start of the navigation to its data being in the page (``performance.now()``
once the page's table has its rows), the figure a person sees.

    .venv/bin/python bench/console_bench.py            # 1,000 topics, 200 groups
    .venv/bin/python bench/console_bench.py --quick    # 100 topics, 20 groups, 3 rounds
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web
from serve_process import ServeProcess

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from josefk.client import AIOAdmin, AIOProducer, NewTopic  # noqa: E402
from josefk.client.types import TopicPartition  # noqa: E402
from josefk.console.api import Console  # noqa: E402
from josefk.console.app import ConsoleSettings, build_app  # noqa: E402


async def populate(bootstrap: str, topics: int, groups: int) -> list[str]:
    names = [f"bench-topic-{i:04d}" for i in range(topics)]
    async with AIOAdmin(bootstrap_servers=bootstrap, request_timeout_ms=120_000) as admin:
        for start in range(0, topics, 100):
            result = await admin.create_topics(
                [NewTopic(n, 1, 1) for n in names[start : start + 100]]
            )
            failed = {n: e for n, e in result.items() if e is not None}
            assert not failed, failed
        producer = AIOProducer(bootstrap_servers=bootstrap, linger_ms=20)
        await producer.start()
        try:
            futures = [await producer.send(n, b'{"bench": true}', b"k", partition=0) for n in names]
            await producer.flush()
            await asyncio.gather(*futures)
        finally:
            await producer.close()
        for g in range(groups):
            await admin.alter_group_offsets(
                f"bench-group-{g:03d}", {TopicPartition(names[g % topics], 0): 0}
            )
    return names


async def page_loads(
    base: str, session: aiohttp.ClientSession, topic: str, group: str
) -> dict[str, list[str]]:
    quoted = topic
    return {
        "/ (overview)": ["/", "/api/overview"],
        "/topics": ["/topics", "/api/topics"],
        "/topics/<name>": [f"/topics/{quoted}", f"/api/topics/{quoted}"],
        "/topics/<name>/messages": [
            f"/topics/{quoted}/messages",
            f"/api/topics/{quoted}/messages?partition=all&from=newest&limit=50",
        ],
        "/groups": ["/groups", "/api/groups"],
        "/groups/<id>": [f"/groups/{group}", f"/api/groups/{group}"],
        "/brokers/<id>": ["/brokers/1", "/api/brokers/1"],
        "/acls": ["/acls", "/api/acls"],
        "/users": ["/users", "/api/users"],
    }


# The element each page fills from /api/ once its data arrived.
FILLED = {
    "/ (overview)": "#cards .card",
    "/topics": "#topics tbody tr",
    "/topics/<name>": "#partitions tbody tr",
    "/topics/<name>/messages": "#records tr.record",
    "/groups": "#groups tbody tr",
    "/groups/<id>": "#lag tbody tr",
    "/brokers/<id>": "#configs tbody tr",
    "/acls": "#acls tbody tr",
    "/users": "#users tbody tr",
}

WAIT_FILLED = """
const selector = arguments[0], done = arguments[arguments.length - 1];
(function poll() {
  if (document.querySelector(selector)) done(performance.now());
  else requestAnimationFrame(poll);
})();
"""


def browser_loads(
    base: str, pages: dict[str, list[str]], rounds: int
) -> list[tuple[str, float, float]]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    driver.set_script_timeout(30)
    rows = []
    try:
        for name, paths in pages.items():
            times = []
            for _ in range(rounds + 1):
                driver.get(base + paths[0])
                times.append(float(driver.execute_async_script(WAIT_FILLED, FILLED[name])))
            times = times[1:]  # the first load fills the browser's cache
            rows.append((name, statistics.median(times), max(times)))
    finally:
        driver.quit()
    return rows


async def timed(session: aiohttp.ClientSession, base: str, paths: list[str]) -> float:
    started = time.perf_counter()
    for path in paths:
        async with session.get(base + path) as response:
            await response.read()
            assert response.status == 200, (path, response.status)
    return (time.perf_counter() - started) * 1000


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        broker = ServeProcess(Path(tmp) / "data")
        try:
            started = time.perf_counter()
            names = await populate(broker.bootstrap, args.topics, args.groups)
            print(
                f"{args.topics} topics and {args.groups} groups made in "
                f"{time.perf_counter() - started:.1f}s"
            )
            app = build_app(ConsoleSettings(bootstrap=broker.bootstrap, interval=args.interval))
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            base = f"http://127.0.0.1:{runner.addresses[0][1]}"
            console: Console = app["console"]
            samples = []
            for _ in range(3):
                started = time.perf_counter()
                await console.sampler.refresh()
                samples.append((time.perf_counter() - started) * 1000)
            snap = console.sampler.snapshot
            assert len(snap.groups) >= args.groups, len(snap.groups)
            print(
                f"one background sample of the cluster: {statistics.median(samples):.0f} ms "
                f"(median of 3; {len(snap.topics)} topics, {len(snap.groups)} groups)"
            )
            async with aiohttp.ClientSession() as session:
                pages = await page_loads(
                    base,
                    session,
                    names[len(names) // 2],
                    "bench-group-100" if args.groups > 100 else "bench-group-001",
                )
                baseline = [
                    await timed(session, base, ["/static/console.css"]) for _ in range(args.rounds)
                ]
                statics = [
                    await timed(session, base, ["/static/console.js", "/static/console.css"])
                    for _ in range(args.rounds)
                ]
                rows = []
                for name, paths in pages.items():
                    times = [await timed(session, base, paths) for _ in range(args.rounds)]
                    rows.append((name, statistics.median(times), max(times)))
            in_browser = (
                await asyncio.to_thread(browser_loads, base, pages, args.rounds)
                if args.browser
                else []
            )
            await runner.cleanup()
        finally:
            broker.stop()
    print()
    print(f"| page ({args.topics:,} topics, {args.groups} groups) | median ms | worst ms |")
    print("| --- | ---: | ---: |")
    print(
        f"| baseline: one static file | {statistics.median(baseline):.1f} | {max(baseline):.1f} |"
    )
    print(
        f"| script and stylesheet (cold cache, once) | {statistics.median(statics):.1f} | {max(statics):.1f} |"
    )
    for name, median, worst in rows:
        print(f"| {name} | {median:.1f} | {worst:.1f} |")
    if in_browser:
        print()
        print("| page in headless chromium, navigation to data shown | median ms | worst ms |")
        print("| --- | ---: | ---: |")
        for name, median, worst in in_browser:
            print(f"| {name} | {median:.1f} | {worst:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--browser", action="store_true", help="also time pages in chromium")
    args = parser.parse_args()
    if args.quick:
        args.topics, args.groups, args.rounds = 100, 20, 3
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
