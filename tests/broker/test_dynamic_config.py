"""DynamicBrokerConfig without a broker: layers, precedence, checks and the Reconfigurable
contract (validated before anything is stored, applied after; a refusal applies nothing)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josefk.broker.configs import ConfigSource, broker_config_entries, cluster_default_entries
from josefk.broker.dynamic_config import (
    DynamicBrokerConfig,
    FileOverridesStore,
    InvalidBrokerConfig,
    InvalidBrokerConfigRequest,
)
from josefk.broker.reconfigurable import ReconfigurableRegistry, ReconfigurationError
from josefk.config.broker import BrokerConfig
from josefk.config.topic import LogConfig

# A part's own settings, which BrokerConfig has no field for (kept beside it for the part),
# and a listener-prefixed TLS name (per broker only: refused at the cluster default).
KEYSTORE = "josefk.test.keystore.location"
PASSWORD = "josefk.test.keystore.password"
LISTENER_KEYSTORE = "listener.name.secure.ssl.keystore.location"


class FakeListener:
    """A TLS listener as the contract sees it: it checks its keystore path, then loads it."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.log = log if log is not None else []

    def reconfigurable_configs(self) -> Set[str]:
        return {KEYSTORE, PASSWORD, LISTENER_KEYSTORE}

    def validate_reconfiguration(self, configs: Mapping[str, str]) -> None:
        self.calls.append(("validate", dict(configs)))
        self.log.append("validate")
        if configs.get(KEYSTORE, "").endswith(".bad"):
            raise ReconfigurationError(f"{KEYSTORE}: cannot load {configs[KEYSTORE]}")

    def reconfigure(self, configs: Mapping[str, str]) -> None:
        self.calls.append(("reconfigure", dict(configs)))
        self.log.append("reconfigure")


class LoggingStore(FileOverridesStore):
    def __init__(self, log: list[str]) -> None:
        super().__init__(None, {})
        self.log = log

    async def update(
        self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        new = await super().update(entity, change)
        self.log.append("store")
        return new


def make(
    static: BrokerConfig | None = None,
    *,
    stored: dict[str, dict[str, str]] | None = None,
    path: Path | None = None,
) -> tuple[DynamicBrokerConfig, FakeListener, FileOverridesStore, list[LogConfig]]:
    registry = ReconfigurableRegistry()
    listener = FakeListener()
    registry.add(listener)
    store = FileOverridesStore(path, {k: dict(v) for k, v in (stored or {}).items()})
    dynamic = DynamicBrokerConfig(
        static or BrokerConfig.from_properties({"log.segment.bytes": "1048576"}),
        broker_id=1,
        registry=registry,
        store=store,
        stored=stored,
    )
    applied: list[LogConfig] = []
    dynamic.log_defaults_listeners.append(applied.append)
    return dynamic, listener, store, applied


def setter(**changes: str | None) -> Callable[[dict[str, str]], dict[str, str]]:
    def edit(stored: dict[str, str]) -> dict[str, str]:
        for key, value in changes.items():
            name = key.replace("_", ".")
            if value is None:
                stored.pop(name, None)
            else:
                stored[name] = value
        return stored

    return edit


async def test_a_part_is_validated_before_and_reconfigured_after() -> None:
    order: list[str] = []
    registry = ReconfigurableRegistry()
    listener = FakeListener(order)
    registry.add(listener)
    dynamic = DynamicBrokerConfig(
        BrokerConfig(), broker_id=1, registry=registry, store=LoggingStore(order)
    )
    await dynamic.alter("1", setter(**{KEYSTORE: "/tls/a.p12"}), touched={KEYSTORE})
    assert order == ["validate", "store", "reconfigure"]
    assert listener.calls[-1] == ("reconfigure", {KEYSTORE: "/tls/a.p12"})
    assert dynamic.overrides("1") == {KEYSTORE: "/tls/a.p12"}


async def test_a_refusal_stores_and_applies_nothing() -> None:
    dynamic, listener, store, applied = make()
    with pytest.raises(InvalidBrokerConfig, match=r"cannot load /tls/x\.bad"):
        await dynamic.alter(
            "1",
            setter(**{KEYSTORE: "/tls/x.bad", "log.segment.bytes": "4096"}),
            touched={KEYSTORE, "log.segment.bytes"},
        )
    assert [kind for kind, _ in listener.calls] == ["validate"]
    assert dynamic.overrides("1") == {}
    assert store.overrides("1") == {}
    assert applied == []
    assert dynamic.current.log_segment_bytes == 1048576


async def test_setting_the_same_path_again_reloads_it() -> None:
    dynamic, listener, _, _ = make(stored={"1": {KEYSTORE: "/tls/a.p12"}})
    listener.calls.clear()
    await dynamic.alter("1", setter(**{KEYSTORE: "/tls/a.p12"}), touched={KEYSTORE})
    assert ("reconfigure", {KEYSTORE: "/tls/a.p12"}) in listener.calls
    # A change of a log default does not concern the listener.
    listener.calls.clear()
    await dynamic.alter("", setter(log_retention_bytes="100"), touched={"log.retention.bytes"})
    assert listener.calls == []


async def test_log_defaults_reach_the_listener_with_precedence() -> None:
    dynamic, _, _, applied = make()
    await dynamic.alter("", setter(log_segment_bytes="8192"), touched={"log.segment.bytes"})
    assert applied[-1].segment_bytes == 8192
    await dynamic.alter("1", setter(log_segment_bytes="4096"), touched={"log.segment.bytes"})
    assert applied[-1].segment_bytes == 4096
    await dynamic.alter("", setter(log_segment_bytes="2048"), touched={"log.segment.bytes"})
    # The per-broker value still wins: the topic defaults did not change.
    assert applied[-1].segment_bytes == 4096
    assert dynamic.current.log_segment_bytes == 4096
    await dynamic.alter("1", setter(log_segment_bytes=None), touched={"log.segment.bytes"})
    assert applied[-1].segment_bytes == 2048
    await dynamic.alter("", setter(log_segment_bytes=None), touched={"log.segment.bytes"})
    assert applied[-1].segment_bytes == 1048576


async def test_kafka_errors() -> None:
    dynamic, _, _, _ = make()

    async def attempt(entity: str, **changes: str) -> str:
        with pytest.raises((InvalidBrokerConfig, InvalidBrokerConfigRequest)) as info:
            await dynamic.alter(entity, setter(**changes), touched=set())
        return f"{type(info.value).__name__}: {info.value}"

    assert await attempt("1", num_partitions="3") == (
        "InvalidBrokerConfigRequest: Cannot update these configs dynamically: Set(num.partitions)"
    )
    assert await attempt("", **{LISTENER_KEYSTORE: "/tls/a.p12"}) == (
        "InvalidBrokerConfigRequest: Cannot update these configs at default cluster level, "
        f"broker id must be specified: Set({LISTENER_KEYSTORE})"
    )
    assert await attempt("1", **{"ssl.keystore.location": "/tls/a.p12"}) == (
        "InvalidBrokerConfigRequest: These security configs can be dynamically updated only "
        "per-listener using the listener prefix: Set(ssl.keystore.location)"
    )
    assert await attempt("1", no_such_key="1") == (
        "InvalidBrokerConfig: Unknown config name: no.such.key"
    )
    message = await attempt("1", log_retention_bytes="lots")
    assert message.startswith("InvalidBrokerConfig: Invalid value lots for configuration")
    assert "log.retention.bytes" in message
    assert await attempt("2", log_retention_bytes="1") == (
        "InvalidBrokerConfigRequest: Unexpected broker id, expected 1, but received 2"
    )
    assert dynamic.overrides("1") == dynamic.overrides("") == {}


async def test_validate_only_changes_nothing() -> None:
    dynamic, listener, store, applied = make()
    await dynamic.alter(
        "1", setter(**{KEYSTORE: "/tls/a.p12"}), touched={KEYSTORE}, validate_only=True
    )
    assert [kind for kind, _ in listener.calls] == ["validate"]
    assert store.overrides("1") == {} and applied == []


def test_describe_hides_secrets_and_names_sources() -> None:
    dynamic, _, _, _ = make(
        stored={
            "1": {PASSWORD: "s3cret", "log.retention.ms": "1000"},
            "": {"log.retention.ms": "2000", "log.cleanup.policy": "compact"},
        }
    )
    layers = dynamic.layers()
    entries = {entry.name: entry for entry in broker_config_entries(layers)}
    password = entries[PASSWORD]
    assert (password.value, password.is_sensitive, password.read_only) == (None, True, False)
    assert [s.value for s in password.synonyms] == [None]
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source) == ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in retention.synonyms] == [
        ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert entries["log.dirs"].read_only
    defaults = {entry.name: entry.value for entry in cluster_default_entries(layers)}
    assert defaults == {"log.retention.ms": "2000", "log.cleanup.policy": "compact"}


def test_stored_values_a_broker_cannot_take_are_left_out() -> None:
    # Written by another broker (or an older josefk): this one keeps serving without them.
    dynamic, _, _, _ = make(
        stored={"": {"log.segment.bytes": "tiny", "log.retention.bytes": "5000"}}
    )
    assert dynamic.overrides("") == {"log.retention.bytes": "5000"}
    assert dynamic.current.log_retention_bytes == 5000
    assert dynamic.current.log_segment_bytes == 1048576


def test_stored_changes_from_the_watch_apply_and_refusals_are_kept_out() -> None:
    dynamic, listener, _, applied = make()
    dynamic.apply_stored({"": {"log.roll.ms": "60000"}, "2": {"log.roll.ms": "1"}})
    assert applied[-1].segment_ms == 60000
    assert dynamic.overrides("2") == {}
    dynamic.apply_stored({"1": {KEYSTORE: "/tls/x.bad"}})
    # The default went away; the refused keystore is not applied, the broker goes on.
    assert applied[-1].segment_ms == 604800000
    assert [kind for kind, _ in listener.calls] == ["validate"]


async def test_the_file_store_survives_a_reload(tmp_path: Path) -> None:
    dynamic, _, _, _ = make(path=tmp_path / "broker-configs.json")
    await dynamic.alter("", setter(log_retention_bytes="100"), touched=set())
    await dynamic.alter("1", setter(**{PASSWORD: "pw"}), touched=set())
    loaded = FileOverridesStore.load(tmp_path)
    assert loaded.overrides("") == {"log.retention.bytes": "100"}
    assert loaded.overrides("1") == {PASSWORD: "pw"}
    (tmp_path / "broker-configs.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"broker-configs\.json"):
        FileOverridesStore.load(tmp_path)


def test_a_part_registered_later_takes_the_stored_values() -> None:
    registry = ReconfigurableRegistry()
    DynamicBrokerConfig(
        BrokerConfig(),
        broker_id=1,
        registry=registry,
        store=FileOverridesStore(None, {}),
        stored={"1": {KEYSTORE: "/tls/stored.p12"}},
    )
    listener = FakeListener()
    registry.add(listener)
    assert listener.calls == [
        ("validate", {KEYSTORE: "/tls/stored.p12"}),
        ("reconfigure", {KEYSTORE: "/tls/stored.p12"}),
    ]
    untouched = FakeListener()
    untouched.reconfigurable_configs = lambda: {"listener.name.other.ssl.key.password"}  # type: ignore[method-assign]
    registry.add(untouched)
    assert untouched.calls == []


_RETENTION_UNITS = {
    "log.retention.ms": 1,
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
}
_layer = st.dictionaries(
    st.sampled_from(sorted(_RETENTION_UNITS)), st.integers(1, 1000), max_size=3
)


@settings(max_examples=60, deadline=None)
@given(static=_layer, default=_layer, per_broker=_layer)
def test_the_highest_layer_setting_a_unit_synonym_decides_retention(
    static: dict[str, int], default: dict[str, int], per_broker: dict[str, int]
) -> None:
    """Kafka's rule: a layer that sets any of log.retention.ms/minutes/hours replaces the
    lower layers' values of all three; within a layer ms beats minutes beats hours."""

    def strings(layer: dict[str, int]) -> dict[str, str]:
        return {k: str(v) for k, v in layer.items()}

    dynamic, _, _, _ = make(
        BrokerConfig.from_properties(strings(static)),
        stored={"": strings(default), "1": strings(per_broker)},
    )
    deciding = next((layer for layer in (per_broker, default, static) if layer), None)
    if deciding is None:
        expected = 168 * 3_600_000
    else:
        unit = next(k for k in _RETENTION_UNITS if k in deciding)
        expected = deciding[unit] * _RETENTION_UNITS[unit]
    assert dynamic.current.retention_ms == expected
    assert dynamic.current.default_log_config().retention_ms == expected
