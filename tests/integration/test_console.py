"""``josefk console`` in a real headless chromium against real ``josefk serve`` processes.

One broker with real records (JSON values with keys and headers, written by confluent-kafka)
and two real groups: ``billing`` with offsets committed at known places (so its lag per
partition and in total is known exactly) and ``live`` with a running confluent-kafka member.
Every page is opened in the browser and must show what it is for: the overview's counts and
its charts (SVG paths drawn), a topic's partitions and configs, records as text, JSON and hex,
filtered, a group's lag and members, a broker's configs and log dirs. Every action is done
through the page's form and its confirmation dialog, and its effect checked through
confluent-kafka. Against a second broker with the authorizer and SASL, a console logged in as
a user without the ACL is refused with a readable message, and the ACLs and SCRAM users pages
list what the administrator's console sees. The browser's console must log no error (the
refusals the test asks for are the only failed loads allowed). Screenshots go to
``.test-artifacts/console/``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_process import BrokerProcess
from client_helpers import CLIENT_TIMEOUT_S, ck_admin, ck_config, ck_create_topic, ck_watermarks
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from console_browser import (
    ConsoleProcess,
    browser_errors,
    screenshot,
    start_browser,
    wait_until,
)
from sasl_broker import SaslBroker, start_plaintext_and_sasl
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

pytestmark = pytest.mark.timeout(300)

TOPIC = "console-orders"
PARTITIONS = 3
PER_PARTITION = 10
BILLING = "console-billing"
LIVE = "console-live"
# billing's committed offset per partition, and so its lag (PER_PARTITION - offset).
COMMITTED = {0: 10, 1: 5, 2: 3}
TOTAL_LAG = sum(PER_PARTITION - o for o in COMMITTED.values())


def value_of(partition: int, index: int) -> dict[str, Any]:
    return {"order": partition * 100 + index, "item": f"book-{partition}-{index}", "paid": True}


def produce_orders(bootstrap: str) -> None:
    producer = Producer(ck_config(bootstrap, **{"linger.ms": 5}))
    for partition in range(PARTITIONS):
        for index in range(PER_PARTITION):
            producer.produce(
                TOPIC,
                key=f"order-{partition}-{index}".encode(),
                value=json.dumps(value_of(partition, index)).encode(),
                partition=partition,
                headers=[("source", b"shop"), ("trace", f"t{partition}{index}".encode())],
            )
    assert producer.flush(CLIENT_TIMEOUT_S) == 0


def commit_billing(bootstrap: str) -> None:
    consumer = Consumer(ck_config(bootstrap, **{"group.id": BILLING, "enable.auto.commit": False}))
    try:
        consumer.commit(
            offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


class LiveMember:
    """A confluent-kafka consumer polling in group ``LIVE`` until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            ck_config(
                bootstrap,
                **{"group.id": LIVE, "client.id": "live-member", "auto.offset.reset": "earliest"},
            )
        )
        self.consumer.subscribe([TOPIC])
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.consumer.poll(0.2)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=30)
        self.consumer.close()


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    browser = start_browser()
    yield browser
    browser.quit()


@pytest.fixture(scope="module")
def console(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ck_create_topic(broker.bootstrap, TOPIC, partitions=PARTITIONS)
    produce_orders(broker.bootstrap)
    commit_billing(broker.bootstrap)
    member = LiveMember(broker.bootstrap)
    process = ConsoleProcess(
        broker.bootstrap,
        tmp_path_factory.mktemp("console") / "console.log",
        extra_args=["--interval", "0.5", "--history", "2"],
    ).start()
    yield process.url
    process.close()
    member.stop()


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    wait_until(
        f"{url} to load", lambda: driver.execute_script("return document.readyState") == "complete"
    )


def text_of(driver: Any, selector: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, selector).text)


def chart_paths(driver: Any, chart_id: str) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, f"#{chart_id} path.line"))


def confirm(driver: Any) -> str:
    """Click the dialog's confirm button; the dialog's text (what was asked)."""
    dialog = wait_until(
        "the confirmation dialog",
        lambda: (
            driver.find_element(By.ID, "dialog").is_displayed()
            and driver.find_element(By.ID, "dialog")
        ),
    )
    asked = str(dialog.text)
    driver.find_element(By.ID, "dialog-confirm").click()
    return asked


def flash(driver: Any, kind: str) -> str:
    return wait_until(
        f"a {kind} message",
        lambda: (
            (box := driver.find_element(By.ID, "flash")).is_displayed()
            and kind in str(box.get_attribute("class"))
            and str(box.text)
        ),
    )


def fill(form: Any, name: str, value: str) -> None:
    field = form.find_element(By.NAME, name)
    field.clear()
    field.send_keys(value)


def no_errors(driver: Any, *allow: str) -> None:
    assert browser_errors(driver, allow=allow) == []


# ---------------------------------------------------------------------- pages


def test_overview_shows_the_cluster_and_draws_its_charts(driver: Any, console: str) -> None:
    open_page(driver, console + "/")
    wait_until("the topic count", lambda: "TOPICS" in text_of(driver, "#cards"))
    cards = text_of(driver, "#cards")
    assert "1\nBROKERS" in cards and "broker 1\nCONTROLLER" in cards
    assert f"{PARTITIONS}" in cards
    assert text_of(driver, "#card-under-replicated").startswith("0")
    assert text_of(driver, "#card-offline").startswith("0")
    assert "controller" in text_of(driver, "#brokers")
    wait_until("both groups by state", lambda: "Empty" in text_of(driver, "#group-states"))
    # Charts are drawn from at least two samples (a rate needs two): a line per series.
    wait_until("the records chart", lambda: chart_paths(driver, "chart-records") >= 1)
    wait_until("the bytes chart", lambda: chart_paths(driver, "chart-bytes") >= 1)
    screenshot(driver, "overview")
    no_errors(driver)


def test_topics_list_and_topic_page(driver: Any, console: str) -> None:
    open_page(driver, console + "/topics")
    row = wait_until(
        "the topic's row",
        lambda: [
            r for r in driver.find_elements(By.CSS_SELECTOR, "#topics tbody tr") if TOPIC in r.text
        ],
    )[0]
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:5] == [TOPIC, str(PARTITIONS), "1", "0", str(PARTITIONS * PER_PARTITION)]
    row.find_element(By.LINK_TEXT, TOPIC).click()
    wait_until(
        "the partitions table",
        lambda: len(driver.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == PARTITIONS,
    )
    for tr in driver.find_elements(By.CSS_SELECTOR, "#partitions tbody tr"):
        _partition, leader, replicas, isr, start, end = [
            c.text for c in tr.find_elements(By.TAG_NAME, "td")
        ][:6]
        assert (leader, replicas, isr, start, end) == ("1", "1", "1", "0", str(PER_PARTITION))
    configs = text_of(driver, "#configs")
    assert "retention.ms" in configs and "default config" in configs
    wait_until("the produce-rate chart", lambda: chart_paths(driver, "chart-produce") == 1)
    screenshot(driver, "topic")
    no_errors(driver)


def test_messages_as_text_json_and_hex_with_filters(driver: Any, console: str) -> None:
    open_page(driver, f"{console}/topics/{TOPIC}/messages")
    wait_until(
        "the records",
        lambda: (
            len(driver.find_elements(By.CSS_SELECTOR, "#records tr.record"))
            == PARTITIONS * PER_PARTITION
        ),
    )
    page = text_of(driver, "#records")
    assert '"item": "book-1-4"' in page  # the value as text, exactly as produced
    assert "order-2-9" in page and "source: shop" in page
    form = driver.find_element(By.ID, "browse")
    Select(form.find_element(By.NAME, "format")).select_by_value("json")
    wait_until("pretty JSON", lambda: '"item": "book-1-4",\n' in text_of(driver, "#records"))
    Select(form.find_element(By.NAME, "format")).select_by_value("hex")
    # {"order": ... starts with 7b 22 6f 72 64 65 72 22
    wait_until("hex", lambda: "7b 22 6f 72 64 65 72 22" in text_of(driver, "#records"))
    Select(form.find_element(By.NAME, "format")).select_by_value("text")
    # One partition from an offset.
    Select(form.find_element(By.NAME, "partition")).select_by_value("1")
    Select(form.find_element(By.NAME, "from")).select_by_value("offset")
    fill(form, "offset", "7")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(
        "partition 1 from offset 7",
        lambda: len(driver.find_elements(By.CSS_SELECTOR, "#records tr.record")) == 3,
    )
    offsets = [
        tr.find_elements(By.TAG_NAME, "td")[1].text
        for tr in driver.find_elements(By.CSS_SELECTOR, "#records tr.record")
    ]
    assert offsets == ["7", "8", "9"]
    # From a time: everything written since (here: since 2000), oldest first.
    Select(form.find_element(By.NAME, "partition")).select_by_value("all")
    Select(form.find_element(By.NAME, "from")).select_by_value("time")
    driver.execute_script(
        "document.querySelector('#browse [name=time]').value = '2000-01-01T00:00:00'"
    )
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(
        "every record from a time",
        lambda: (
            len(driver.find_elements(By.CSS_SELECTOR, "#records tr.record"))
            == PARTITIONS * PER_PARTITION
        ),
    )
    # Filters: by key, then by content, over all partitions from the newest.
    Select(form.find_element(By.NAME, "partition")).select_by_value("all")
    Select(form.find_element(By.NAME, "from")).select_by_value("newest")
    fill(form, "key", "order-2-")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(
        "the key filter",
        lambda: len(driver.find_elements(By.CSS_SELECTOR, "#records tr.record")) == PER_PARTITION,
    )
    assert all(
        tr.text.startswith("2 ")
        for tr in driver.find_elements(By.CSS_SELECTOR, "#records tr.record")
    )
    fill(form, "key", "")
    fill(form, "q", "book-0-3")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(
        "the content filter",
        lambda: len(driver.find_elements(By.CSS_SELECTOR, "#records tr.record")) == 1,
    )
    assert "order-0-3" in text_of(driver, "#records")
    screenshot(driver, "messages")
    no_errors(driver)


def test_groups_and_a_groups_lag(driver: Any, console: str) -> None:
    open_page(driver, console + "/groups")
    row = wait_until(
        "billing's row with its lag",
        lambda: [
            r
            for r in driver.find_elements(By.CSS_SELECTOR, "#groups tbody tr")
            if BILLING in r.text and r.text.endswith(str(TOTAL_LAG))
        ],
    )[0]
    assert "Empty" in row.text and "classic" in row.text
    wait_until("the live group", lambda: LIVE in text_of(driver, "#groups"))
    row.find_element(By.LINK_TEXT, BILLING).click()
    wait_until("the total lag", lambda: text_of(driver, "#total-lag").startswith(str(TOTAL_LAG)))
    lags = {}
    for tr in driver.find_elements(By.CSS_SELECTOR, "#lag tr.lag-row"):
        topic, partition, committed, end, lag = [
            c.text for c in tr.find_elements(By.TAG_NAME, "td")
        ][:5]
        assert topic == TOPIC and end == str(PER_PARTITION)
        assert committed == str(COMMITTED[int(partition)])
        lags[int(partition)] = int(lag)
    assert lags == {p: PER_PARTITION - o for p, o in COMMITTED.items()}
    wait_until("the lag chart", lambda: chart_paths(driver, "chart-lag") == 1)
    screenshot(driver, "group-lag")
    # The live group: its member and the partitions it owns.
    open_page(driver, f"{console}/groups/{LIVE}")
    wait_until("the live member", lambda: "live-member" in text_of(driver, "#members"))
    assert "Stable" in text_of(driver, "#cards")
    assert f"{TOPIC}-0" in text_of(driver, "#members")
    no_errors(driver)


def test_broker_acls_and_users_pages_without_an_authorizer(driver: Any, console: str) -> None:
    open_page(driver, console + "/brokers/1")
    wait_until("the broker's configs", lambda: "log.segment.bytes" in text_of(driver, "#configs"))
    wait_until("its log dir", lambda: "data" in text_of(driver, "#log-dirs"))
    assert "controller" in text_of(driver, "#cards")
    open_page(driver, console + "/acls")
    wait_until(
        "the no-authorizer note", lambda: "No authorizer runs" in text_of(driver, "#acl-summary")
    )
    open_page(driver, console + "/users")
    wait_until("the users summary", lambda: "SCRAM user" in text_of(driver, "#user-summary"))
    no_errors(driver)


# ---------------------------------------------------------------------- actions


def test_every_action_through_its_confirmation(
    driver: Any, console: str, broker: BrokerProcess
) -> None:
    bootstrap = broker.bootstrap
    created = "console-made"
    open_page(driver, console + "/topics")
    driver.find_element(By.CSS_SELECTOR, "details.action summary").click()
    form = driver.find_element(By.ID, "create-topic")
    fill(form, "name", created)
    fill(form, "partitions", "2")
    fill(form, "configs", "retention.ms=3600000")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    assert created in confirm(driver)
    assert f'"{created}" created' in flash(driver, "ok")
    metadata = ck_admin(bootstrap).list_topics(created, timeout=CLIENT_TIMEOUT_S)
    assert len(metadata.topics[created].partitions) == 2
    wait_until("the new topic in the list", lambda: created in text_of(driver, "#topics"))

    open_page(driver, f"{console}/topics/{created}")
    wait_until(
        "its partitions",
        lambda: len(driver.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == 2,
    )
    # Produce a record with a key and a header.
    driver.find_element(By.XPATH, "//summary[text()='Produce a record']").click()
    form = driver.find_element(By.ID, "produce")
    fill(form, "partition", "1")
    fill(form, "key", "k1")
    fill(form, "value", '{"made": "in the browser"}')
    fill(form, "headers", "origin=console")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    confirm(driver)
    assert "Produced to partition 1 at offset 0" in flash(driver, "ok")
    consumer = Consumer(
        ck_config(bootstrap, **{"group.id": "console-check", "enable.auto.commit": False})
    )
    try:
        consumer.assign([TopicPartition(created, 1, 0)])
        message = wait_until("the produced record", lambda: consumer.poll(1.0))
        assert (message.key(), message.value()) == (b"k1", b'{"made": "in the browser"}')
        assert message.headers() == [("origin", b"console")]
    finally:
        consumer.close()
    # Add partitions.
    driver.find_element(By.XPATH, "//summary[text()='Add partitions']").click()
    form = driver.find_element(By.ID, "add-partitions")
    fill(form, "count", "4")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    confirm(driver)
    assert "now has 4 partitions" in flash(driver, "ok")
    wait_until(
        "4 partitions",
        lambda: (
            len(ck_admin(bootstrap).list_topics(created, timeout=10).topics[created].partitions)
            == 4
        ),
    )
    # Alter a topic config.
    form = driver.find_element(By.ID, "alter-config")
    fill(form, "name", "retention.ms")
    fill(form, "value", "7200000")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    assert "retention.ms=7200000" in confirm(driver)
    flash(driver, "ok")
    resource = ConfigResource(ConfigResource.Type.TOPIC, created)
    config_admin = ck_admin(bootstrap)  # kept alive until the future resolves
    entries = config_admin.describe_configs([resource])[resource].result(timeout=CLIENT_TIMEOUT_S)
    assert entries["retention.ms"].value == "7200000"
    wait_until("the new value shown", lambda: "7200000" in text_of(driver, "#configs"))
    # Delete records up to an offset (of the orders topic: 10 records in partition 2).
    open_page(driver, f"{console}/topics/{TOPIC}")
    driver.find_element(By.XPATH, "//summary[text()='Delete records']").click()
    form = driver.find_element(By.ID, "delete-records")
    fill(form, "partition", "2")
    fill(form, "offset", "4")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    assert "before offset 4" in confirm(driver)
    assert "now starts at offset 4" in flash(driver, "ok")
    assert ck_watermarks(bootstrap, TOPIC, 2) == (4, PER_PARTITION)
    # Reset billing's offsets: the dry run shows the preview, the confirmation commits it.
    open_page(driver, f"{console}/groups/{BILLING}")
    wait_until(
        "the lag table",
        lambda: len(driver.find_elements(By.CSS_SELECTOR, "#lag tr.lag-row")) == PARTITIONS,
    )
    form = driver.find_element(By.ID, "reset-offsets")
    Select(form.find_element(By.NAME, "to")).select_by_value("latest")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    preview = wait_until("the dry-run preview", lambda: driver.find_element(By.ID, "reset-preview"))
    rows = [
        [c.text for c in tr.find_elements(By.TAG_NAME, "td")]
        for tr in preview.find_elements(By.CSS_SELECTOR, "tbody tr")
    ]
    assert rows == [[TOPIC, str(p), str(o), str(PER_PARTITION)] for p, o in COMMITTED.items()]
    # Nothing committed by the preview.
    committed_before = _committed(bootstrap, BILLING)
    assert committed_before == COMMITTED
    confirm(driver)
    assert "reset" in flash(driver, "ok")
    assert _committed(bootstrap, BILLING) == {p: PER_PARTITION for p in COMMITTED}
    wait_until("no lag left", lambda: text_of(driver, "#total-lag").startswith("0"))
    # A group with a live member is refused, readably.
    open_page(driver, f"{console}/groups/{LIVE}")
    wait_until("the live member", lambda: "live-member" in text_of(driver, "#members"))
    driver.find_element(By.CSS_SELECTOR, "#reset-offsets button[type=submit]").click()
    confirm(driver)
    assert "stop its consumers first" in flash(driver, "error")
    # Delete the topic made above.
    open_page(driver, f"{console}/topics/{created}")
    driver.find_element(By.XPATH, "//summary[text()='Delete topic']").click()
    driver.find_element(By.CSS_SELECTOR, "#delete-topic button[type=submit]").click()
    assert created in confirm(driver)
    wait_until("the topics list", lambda: driver.current_url.endswith("/topics"))
    wait_until(
        "the topic gone", lambda: created not in ck_admin(bootstrap).list_topics(timeout=10).topics
    )
    no_errors(driver, "status of 409")


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    consumer = Consumer(ck_config(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        found = consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=CLIENT_TIMEOUT_S
        )
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


# ---------------------------------------------------------------------- authorizer

PASSWORDS = {"admin": "admin-secret", "bob": "bob-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SECURED = "console-secured"


def sasl_args(user: str) -> list[str]:
    return [
        "-X", "security.protocol=SASL_PLAINTEXT",
        "-X", "sasl.mechanism=SCRAM-SHA-256",
        "-X", f"sasl.username={user}",
        "-X", f"sasl.password={PASSWORDS[user]}",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    base = tmp_path_factory.mktemp("console-acls")
    started = start_plaintext_and_sasl(
        base,
        users=PASSWORDS,
        settings=[f"authorizer.class.name={AUTHORIZER}", "super.users=User:admin;User:ANONYMOUS"],
    )
    admin = AdminClient(ck_config(started.plaintext))
    ck_create_topic(started.plaintext, SECURED, partitions=1)
    # bob may see and read the topic, nothing more.
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            SECURED,
            ResourcePatternType.LITERAL,
            "User:bob",
            "*",
            op,
            AclPermissionType.ALLOW,
        )
        for op in (AclOperation.DESCRIBE, AclOperation.READ)
    ]
    for future in admin.create_acls(bindings, request_timeout=CLIENT_TIMEOUT_S).values():
        future.result(timeout=CLIENT_TIMEOUT_S)
    yield started
    started.stop()


def test_unauthorized_actions_are_refused_readably(
    driver: Any, acl_broker: SaslBroker, tmp_path: Path
) -> None:
    bob = ConsoleProcess(
        acl_broker.sasl, tmp_path / "bob.log", extra_args=[*sasl_args("bob"), "--interval", "0.5"]
    ).start()
    admin = ConsoleProcess(
        acl_broker.sasl,
        tmp_path / "admin.log",
        extra_args=[*sasl_args("admin"), "--interval", "0.5"],
    ).start()
    try:
        open_page(driver, f"{bob.url}/topics/{SECURED}")
        wait_until(
            "bob sees the topic",
            lambda: len(driver.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == 1,
        )
        driver.find_element(By.XPATH, "//summary[text()='Produce a record']").click()
        form = driver.find_element(By.ID, "produce")
        fill(form, "value", "not allowed")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        confirm(driver)
        refusal = flash(driver, "error")
        assert refusal.startswith("Not authorized to produce to topic console-secured")
        assert "TOPIC_AUTHORIZATION_FAILED" in refusal
        driver.find_element(By.XPATH, "//summary[text()='Delete topic']").click()
        driver.find_element(By.CSS_SELECTOR, "#delete-topic button[type=submit]").click()
        confirm(driver)
        wait_until(
            "the delete refusal",
            lambda: "Not authorized to delete topic console-secured" in flash(driver, "error"),
        )
        screenshot(driver, "refused")
        assert SECURED in ck_admin(acl_broker.plaintext).list_topics(timeout=10).topics
        no_errors(driver, "status of 403")
        # The administrator's console lists the ACLs and the SCRAM users.
        open_page(driver, f"{admin.url}/acls")
        wait_until("bob's ACLs", lambda: text_of(driver, "#acls").count("User:bob") == 2)
        assert "DESCRIBE" in text_of(driver, "#acls") and "READ" in text_of(driver, "#acls")
        open_page(driver, f"{admin.url}/users")
        wait_until(
            "the SCRAM users",
            lambda: "bob" in text_of(driver, "#users") and "admin" in text_of(driver, "#users"),
        )
        assert "SCRAM-SHA-256" in text_of(driver, "#users")
        no_errors(driver)
    finally:
        bob.close()
        admin.close()
