"""``josefk console`` against a three-broker cluster (real etcd, real ``josefk serve``
processes) while a broker is SIGKILLed: the overview, in a real headless chromium, shows the
partitions left under-replicated and the broker gone, and shows the cluster whole again once
the broker is back and its replicas have rejoined the ISR. The console is given the brokers'
Prometheus endpoints, so its bytes chart draws bytes out as well as in.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cluster_process import LocalCluster, wait_for
from confluent_kafka.admin import NewTopic
from console_browser import ConsoleProcess, browser_errors, screenshot, start_browser, wait_until
from etcd_server import ETCD, SKIP_REASON
from selenium.webdriver.common.by import By

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(ETCD is None, reason=SKIP_REASON),
]

TOPIC = "console-replicated"
PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("console-cluster"),
        settings=["replica.lag.time.max.ms=3000", "offsets.topic.num.partitions=6"],
        metrics=True,
    ) as running:
        yield running


def card(driver: Any, card_id: str) -> int:
    text = str(driver.find_element(By.ID, card_id).text)
    return int(text.split("\n")[0].replace(",", ""))


def test_overview_shows_under_replicated_partitions_and_recovers(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]).values():
        future.result(timeout=30)
    wait_for(
        "every partition with a full ISR",
        lambda: all(len(isr) == 3 for _, _, isr in cluster.partition_states(TOPIC).values()),
    )
    console = ConsoleProcess(
        cluster.bootstrap,
        tmp_path_factory.mktemp("console") / "console.log",
        extra_args=[
            "--interval",
            "0.5",
            *(
                arg
                for b in cluster.brokers.values()
                for arg in ("--metrics-url", f"http://{b.host}:{b.metrics_port}/metrics")
            ),
        ],
    ).start()
    driver = start_browser()
    try:
        driver.get(console.url + "/")
        wait_until(
            "three brokers", lambda: "3\nBROKERS" in driver.find_element(By.ID, "cards").text
        )
        assert card(driver, "card-under-replicated") == 0
        # With the brokers' metrics the bytes chart has both lines, in and out.
        wait_until(
            "bytes in and out from the brokers' metrics",
            lambda: len(driver.find_elements(By.CSS_SELECTOR, "#chart-bytes path.line")) == 2,
        )
        assert "out:" in driver.find_element(By.ID, "chart-bytes-legend").text
        victim = cluster.brokers[3]
        victim.kill()
        # The overview refreshes itself: no reload.
        under = wait_until(
            "under-replicated partitions on the overview",
            lambda: card(driver, "card-under-replicated"),
            timeout=60,
        )
        assert under > 0
        assert card(driver, "card-offline") == 0
        wait_until(
            "the broker gone", lambda: "2\nBROKERS" in driver.find_element(By.ID, "cards").text
        )
        wait_until("the partitions listed", lambda: TOPIC in driver.find_element(By.ID, "urp").text)
        screenshot(driver, "cluster-under-replicated")
        victim.start()
        wait_until(
            "the cluster whole again",
            lambda: (
                card(driver, "card-under-replicated") == 0
                and "3\nBROKERS" in driver.find_element(By.ID, "cards").text
            ),
            timeout=90,
        )
        assert not driver.find_element(By.ID, "urp-section").is_displayed()
        screenshot(driver, "cluster-recovered")
        assert browser_errors(driver) == []
    finally:
        driver.quit()
        console.close()
