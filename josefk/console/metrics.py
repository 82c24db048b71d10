"""The brokers' Prometheus endpoints, read by the console where the user gives them.

Owns ``MetricsScraper``: GET each ``--metrics-url``, parse the text format and sum Kafka's
``BrokerTopicMetrics`` byte counters over topics and brokers (``bytes_in``, ``bytes_out``).
The names are Kafka's JMX names as the Prometheus JMX exporter flattens them (josefk's own
exporter uses the same), so this works against any broker exported that way. An endpoint that
does not answer is left out of that sample.

Imports nothing of josefk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

# Sample name (with the counter's _total) -> the console's series.
_COUNTERS = {
    "kafka_server_brokertopicmetrics_bytesin_total": "bytes_in",
    "kafka_server_brokertopicmetrics_bytesout_total": "bytes_out",
}


def sum_counters(text: str) -> dict[str, float]:
    """The console's series from one endpoint's exposition text (0 for a counter that has no
    sample yet: a broker that served no topic has no labelled series)."""
    totals = dict.fromkeys(_COUNTERS.values(), 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = _COUNTERS.get(sample.name)
            if name is not None:
                totals[name] = totals.get(name, 0.0) + sample.value
    return totals


class MetricsScraper:
    def __init__(self, urls: Sequence[str], *, timeout: float = 3.0) -> None:
        self.urls = list(urls)
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def scrape(self) -> dict[str, float]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        session = self._session

        async def one(url: str) -> dict[str, float]:
            try:
                async with session.get(url) as response:
                    response.raise_for_status()
                    return sum_counters(await response.text())
            except (aiohttp.ClientError, TimeoutError, ValueError):
                return {}

        totals: dict[str, float] = {}
        for found in await asyncio.gather(*(one(u) for u in self.urls)):
            for name, value in found.items():
                totals[name] = totals.get(name, 0.0) + value
        return totals

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
