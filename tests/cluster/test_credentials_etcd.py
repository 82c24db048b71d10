"""The cluster's SCRAM credential store on a real etcd: what one broker's store persists, the
others' see by watch (new users, changed mechanisms, deletions), users with "/" and "=" in
their names included, and the watch picks up again after etcd restarts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from types import SimpleNamespace

import pytest
from etcd_server import EtcdServer

from josefk.broker.security.scram import make_credential
from josefk.broker.security.store import EtcdCredentialStore, decode_user, encode_user
from josefk.cluster.credentials import CredentialRecords
from josefk.cluster.errors import MetadataStoreError
from josefk.cluster.metadata_store import EtcdMetadataStore, parse_endpoints

pytestmark = pytest.mark.timeout(120)


async def _store(etcd: EtcdServer) -> tuple[EtcdMetadataStore, EtcdCredentialStore]:
    metadata = EtcdMetadataStore(parse_endpoints(etcd.endpoint), timeout_s=2.0)
    await metadata.connect()
    credentials = EtcdCredentialStore(CredentialRecords(metadata))
    await credentials.start()
    return metadata, credentials


async def _until(what: str, condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            while not condition():  # noqa: ASYNC110  a condition polled with a deadline
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def test_users_follow_from_one_store_to_another_and_across_an_etcd_restart(
    etcd: EtcdServer,
) -> None:
    async def run() -> None:
        meta_a, a = await _store(etcd)
        meta_b, b = await _store(etcd)
        try:
            odd = "team/ops=1,x"
            a.upsert("alice", make_credential("SCRAM-SHA-256", b"pw1"))
            a.upsert(odd, make_credential("SCRAM-SHA-512", b"pw2"))
            await a.persist()
            await _until("both users on b", lambda: set(b.users()) == {"alice", odd})
            credential = b.get(odd, "SCRAM-SHA-512")
            assert credential is not None and credential.matches(b"pw2")

            b.upsert("alice", make_credential("SCRAM-SHA-512", b"pw3"))
            assert b.delete(odd, "SCRAM-SHA-512")
            await b.persist()
            await _until(
                "alice's second mechanism and the deletion on a",
                lambda: set(a.users()) == {"alice"} and len(a.users()["alice"]) == 2,
            )

            await asyncio.to_thread(etcd.restart)
            b.upsert("carol", make_credential("SCRAM-SHA-256", b"pw4"))
            async with asyncio.timeout(30):
                while True:  # b's own etcd client reconnects on its own time
                    try:
                        await b.persist()
                        break
                    except Exception:  # noqa: BLE001  whatever etcd's restart shows: try again
                        await asyncio.sleep(0.2)
            await _until("carol on a after etcd's restart", lambda: "carol" in a.users())
        finally:
            for store, metadata in ((a, meta_a), (b, meta_b)):
                await store.close()
                await metadata.close()

    asyncio.run(run())


class _WedgedRecords:
    """Credential records whose watch ignores cancellation until released: the follower of
    a store whose etcd client's watcher is wedged."""

    def __init__(self) -> None:
        self.released = asyncio.Event()

    async def load(self) -> tuple[int, dict[str, bytes]]:
        return 0, {}

    async def follow(
        self, revision: int, users: object, on_change: object, on_reload: object
    ) -> None:
        while not self.released.is_set():
            try:
                await self.released.wait()
            except asyncio.CancelledError:
                continue  # wedged: the cancellation is lost


def test_closing_a_store_whose_watch_will_not_stop_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fault path: the broker's shutdown must not wait for good on the credentials watch."""
    import josefk.broker.security.store as store_module

    monkeypatch.setattr(store_module, "_CLOSE_TIMEOUT_S", 0.05)

    async def run() -> None:
        records = _WedgedRecords()
        store = EtcdCredentialStore(records)  # type: ignore[arg-type]
        await store.start()
        try:
            async with asyncio.timeout(5):
                await store.close()
        finally:
            records.released.set()  # let the task end before the loop closes

    asyncio.run(run())


class _QuietClient:
    """An etcd client whose watch never delivers (its stream did not come back after etcd
    restarted) while the keys change: the fault the follower's check is for."""

    def __init__(self) -> None:
        self.keys: dict[bytes, bytes] = {}
        self.revision = 1
        self.watches = 0
        self.reads = 0

    async def get_prefix(self, prefix: bytes) -> object:
        self.reads += 1
        kvs = [
            SimpleNamespace(key=k, value=v, mod_revision=self.revision)
            for k, v in sorted(self.keys.items())
            if k.startswith(prefix)
        ]
        return _Range(kvs, SimpleNamespace(revision=self.revision))

    async def watch_prefix(self, prefix: bytes, start_revision: int) -> object:
        self.watches += 1
        return _SilentWatch()


class _Range(list[object]):
    def __init__(self, kvs: list[object], header: object) -> None:
        super().__init__(kvs)
        self.header = header


class _SilentWatch:
    def __aiter__(self) -> _SilentWatch:
        return self

    async def __anext__(self) -> object:
        await asyncio.Event().wait()  # nothing ever comes
        raise AssertionError("unreachable")

    async def cancel(self) -> None:
        return None


def test_a_quiet_watch_is_checked_and_a_missed_change_reloaded() -> None:
    """A fault path: a user written while the watch was silently broken reaches the follower
    by the check after a silence, and a new watch follows from there; silences without a
    change reload nothing."""
    client = _QuietClient()
    store = SimpleNamespace(
        client=client, timeout_s=1.0, key=lambda *parts: "/".join(("P", *parts)).encode()
    )
    records = CredentialRecords(store)  # type: ignore[arg-type]

    async def run() -> None:
        reloads: list[dict[str, bytes]] = []
        reloaded = asyncio.Event()

        def on_reload(users: Mapping[str, bytes]) -> None:
            reloads.append(dict(users))
            reloaded.set()

        follower = asyncio.create_task(
            records.follow(1, {}, lambda user, value: None, on_reload, check_after_s=0.01)
        )
        try:
            # Three checks after silences with nothing changed.
            await _until("three quiet checks", lambda: client.reads >= 3)
            assert reloads == []
            assert client.watches == 1
            client.keys[b"P/scram_credentials/dave"] = b"credentials"
            client.revision = 2
            async with asyncio.timeout(10):
                await reloaded.wait()
            assert reloads == [{"dave": b"credentials"}]
            await _until("a new watch", lambda: client.watches >= 2)
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower

    asyncio.run(run())


class _FlakyRecords:
    """Credential records in a dict, whose writes fail while ``down`` and wait for ``gate``
    when it is set, with the follower's callbacks kept for the test to call: etcd going away
    and the follower reloading while a write is in flight."""

    def __init__(self) -> None:
        self.keys: dict[str, bytes] = {}
        self.down = False
        self.gate: asyncio.Event | None = None
        self.on_change: Callable[[str, bytes | None], None] | None = None
        self.on_reload: Callable[[Mapping[str, bytes]], None] | None = None

    async def load(self) -> tuple[int, dict[str, bytes]]:
        return 1, dict(self.keys)

    async def follow(
        self,
        revision: int,
        users: object,
        on_change: Callable[[str, bytes | None], None],
        on_reload: Callable[[Mapping[str, bytes]], None],
    ) -> None:
        self.on_change, self.on_reload = on_change, on_reload
        await asyncio.Event().wait()

    async def _write(self) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise MetadataStoreError("etcd is unreachable")

    async def put(self, user: str, value: bytes) -> None:
        await self._write()
        self.keys[user] = value

    async def delete(self, user: str) -> None:
        await self._write()
        self.keys.pop(user, None)


def test_a_change_survives_a_failed_write_and_a_reload_before_the_next() -> None:
    """A fault path: a user whose write failed (etcd restarting) stays on this broker and is
    written by the next persist, though the follower reloaded etcd's older content in
    between; a watch event from before the write does not undo it either."""

    async def run() -> None:
        records = _FlakyRecords()
        store = EtcdCredentialStore(records)  # type: ignore[arg-type]
        await store.start()
        await asyncio.sleep(0)  # the follower starts
        try:
            assert records.on_reload is not None and records.on_change is not None
            store.upsert("carol", make_credential("SCRAM-SHA-256", b"pw"))
            records.down = True
            with pytest.raises(MetadataStoreError):
                await store.persist()
            records.on_reload({})  # etcd came back without carol
            records.on_change("carol", None)
            assert "carol" in store.users()
            records.down = False
            await store.persist()
            assert set(records.keys) == {"carol"}
            credential = decode_user(records.keys["carol"])
            assert credential["SCRAM-SHA-256"].matches(b"pw")
            records.on_reload(dict(records.keys))
            records.on_change("carol", None)  # deleted elsewhere, now nothing is pending
            assert store.users() == {}
        finally:
            await store.close()

    asyncio.run(run())


def test_a_reload_while_a_write_is_in_flight_neither_drops_nor_reverts_the_rest() -> None:
    """A fault path: one persist writes two users; while the first write waits, the follower
    reloads etcd's content from before both. The second user is still written with its new
    credentials, not deleted nor written back as etcd had it."""

    async def run() -> None:
        records = _FlakyRecords()
        store = EtcdCredentialStore(records)  # type: ignore[arg-type]
        old = make_credential("SCRAM-SHA-256", b"old")
        records.keys["bob"] = encode_user({old.mechanism: old})
        await store.start()
        await asyncio.sleep(0)  # the follower starts
        try:
            assert records.on_reload is not None
            store.upsert("alice", make_credential("SCRAM-SHA-256", b"a"))
            store.upsert("bob", make_credential("SCRAM-SHA-256", b"new"))
            records.gate = asyncio.Event()
            persist = asyncio.create_task(store.persist())
            await asyncio.sleep(0)  # the first write is waiting at the gate
            records.on_reload(dict(records.keys))
            records.gate.set()
            await persist
            assert set(records.keys) == {"alice", "bob"}
            assert decode_user(records.keys["bob"])["SCRAM-SHA-256"].matches(b"new")
            assert store.get("bob", "SCRAM-SHA-256").matches(b"new")  # type: ignore[union-attr]
        finally:
            await store.close()

    asyncio.run(run())
