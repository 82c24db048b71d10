"""The console's JSON API under ``/api/``: what the pages fetch, and what scripts may call.

Owns one handler per resource (overview, topics, a topic, its messages, groups, a group,
a broker, ACLs, users, history) and per action (create/delete a topic, add partitions, alter a
topic config, produce a record, delete records, reset a group's offsets with its dry run).
Reads come from the sampler's latest snapshot where it has what is asked (lists, counts)
and from the cluster where a page needs the present (one topic's partitions and configs, one
group's offsets); actions go to the cluster with the console's own credentials, and a refusal
comes back as ``{"error": "...", "code": "TOPIC_AUTHORIZATION_FAILED"}`` with HTTP 403 (400 for
a bad request, 404 for an unknown name, 409 for a state that forbids it, 502 when no broker
answers), a sentence a person can act on.

Imports josefk.client only.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from josefk.client import (
    AIOAdmin,
    AIOConsumer,
    AIOProducer,
    ConfigEntry,
    GroupDescription,
    GroupListing,
    NewTopic,
    ResourceType,
    TopicDescription,
)
from josefk.client.admin import AclBindingFilter
from josefk.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
)
from josefk.client.types import TopicPartition
from josefk.console.history import History
from josefk.console.sampler import Sampler, Snapshot, offline, under_replicated

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Records a browse returns at most, and how far back a filtered browse from the newest looks.
MAX_RECORDS = 500
FILTER_SCAN = 5_000
BROWSE_DEADLINE_S = 5.0
# Group states in which the group has no members and its offsets may be moved.
IDLE_STATES = frozenset({"Empty", "Dead"})


@dataclass(slots=True)
class Console:
    """What every handler shares: the clients (with the console's credentials), the
    sampler and its history, and the settings the consumer and producer are built from."""

    admin: AIOAdmin
    sampler: Sampler
    history: History
    client_settings: dict[str, Any]
    bootstrap: str
    producer: AIOProducer | None = None

    async def get_producer(self) -> AIOProducer:
        if self.producer is None:
            producer = AIOProducer(
                bootstrap_servers=self.bootstrap,
                client_id="josefk-console",
                # A record produced from the console is one record a person typed: no
                # producer id (that needs IDEMPOTENT_WRITE), and an answer within seconds.
                enable_idempotence=False,
                linger_ms=0,
                delivery_timeout_ms=15_000,
                request_timeout_ms=10_000,
                **self.client_settings,
            )
            await producer.start()
            self.producer = producer
        return self.producer

    async def close(self) -> None:
        if self.producer is not None:
            await self.producer.close()


class ApiError(Exception):
    """A refusal the console itself makes (bad input, a state that forbids the action)."""

    def __init__(self, status: int, message: str, code: str = "INVALID_REQUEST") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def _console(request: web.Request) -> Console:
    console: Console = request.app["console"]
    return console


def ok(data: Any) -> web.Response:
    return web.json_response(data, dumps=lambda d: json.dumps(d, separators=(",", ":")))


def error_response(status: int, message: str, code: str) -> web.Response:
    return web.json_response({"error": message, "code": code}, status=status)


def describe_kafka_error(exc: KafkaError, action: str) -> tuple[int, str]:
    """HTTP status and the sentence a person reads for a client error during ``action``."""
    name = exc.name
    if name.endswith("AUTHORIZATION_FAILED"):
        what = {
            "TOPIC_AUTHORIZATION_FAILED": "the topic",
            "GROUP_AUTHORIZATION_FAILED": "the group",
            "CLUSTER_AUTHORIZATION_FAILED": "the cluster",
            "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "the transactional id",
        }.get(name, "the resource")
        return 403, (
            f"Not authorized to {action}: the console's user has no ACL allowing it on {what} "
            f"({name}). Ask an administrator for the ACL, or run the console with other "
            "credentials (--command-config, -X)."
        )
    if name == "SECURITY_DISABLED":
        return 404, "No authorizer runs on this cluster, so there are no ACLs (SECURITY_DISABLED)."
    if isinstance(exc, KafkaConnectionError):
        return 502, f"No broker answered while trying to {action}: {exc.message}"
    if isinstance(exc, KafkaTimeoutError):
        return 504, f"The cluster did not answer in time while trying to {action}: {exc.message}"
    status = 404 if name in ("UNKNOWN_TOPIC_OR_PARTITION", "GROUP_ID_NOT_FOUND") else 400
    if name in ("TOPIC_ALREADY_EXISTS", "NON_EMPTY_GROUP", "UNKNOWN_MEMBER_ID"):
        status = 409
    context = ", ".join(f"{k}={v}" for k, v in exc.context.items())
    detail = f" ({context})" if context else ""
    return status, f"Could not {action}: {exc.message} [{name}]{detail}"


def action(what: str) -> Callable[[Handler], Handler]:
    """Wrap a handler: its client errors and ApiErrors become readable JSON refusals."""

    def wrap(handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except ApiError as exc:
                return error_response(exc.status, exc.message, exc.code)
            except KafkaError as exc:
                status, message = describe_kafka_error(exc, what.format(**request.match_info))
                return error_response(status, message, exc.name)

        run.__name__ = handler.__name__
        return run

    return wrap


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


def _int(value: Any, what: str, *, minimum: int | None = None) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ApiError(400, f"{what} must be a whole number, not {value!r}") from None
    if minimum is not None and number < minimum:
        raise ApiError(400, f"{what} must be at least {minimum}")
    return number


# ---------------------------------------------------------------------- reads


def _brokers(snapshot: Snapshot) -> list[dict[str, Any]]:
    cluster = snapshot.cluster
    if cluster is None:
        return []
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    for topic in snapshot.topics.values():
        for p in topic.partitions:
            leaders[p.leader] = leaders.get(p.leader, 0) + 1
            for r in p.replicas:
                replicas[r] = replicas.get(r, 0) + 1
    return [
        {
            "id": b.node_id,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "controller": b.node_id == cluster.controller_id,
            "leaders": leaders.get(b.node_id, 0),
            "replicas": replicas.get(b.node_id, 0),
        }
        for b in sorted(cluster.brokers, key=lambda b: b.node_id)
    ]


def _rate_series(history: History) -> dict[str, list[tuple[int, float]]]:
    return {
        name: history.rates(name) for name in ("records_in", "bytes_in", "records_out", "bytes_out")
    }


async def overview(request: web.Request) -> web.Response:
    console = _console(request)
    snap = console.sampler.snapshot
    topics = snap.topics.values()
    states: dict[str, int] = {}
    for g in snap.groups:
        states[g.state or "Unknown"] = states.get(g.state or "Unknown", 0) + 1
    return ok(
        {
            "taken_ms": snap.taken_ms,
            "bootstrap": console.bootstrap,
            "cluster_id": snap.cluster.cluster_id if snap.cluster else None,
            "controller": snap.cluster.controller_id if snap.cluster else None,
            "brokers": _brokers(snap),
            "topics": sum(1 for t in topics if not t.is_internal),
            "internal_topics": sum(1 for t in topics if t.is_internal),
            "partitions": sum(len(t.partitions) for t in topics),
            "under_replicated": sum(under_replicated(t) for t in topics),
            "offline": sum(offline(t) for t in topics),
            "under_replicated_partitions": [
                {"topic": t.name, "partition": p.partition, "replicas": p.replicas, "isr": p.isr}
                # the user's topics before the internal ones, which a dead broker
                # leaves with dozens of partitions each
                for t in sorted(topics, key=lambda t: (t.is_internal, t.name))
                for p in t.partitions
                if len(p.isr) < len(p.replicas) or p.leader < 0
            ][:100],
            "groups": len(snap.groups),
            "groups_by_state": dict(sorted(states.items())),
            "rates": _rate_series(console.history),
            "metrics": console.sampler.metrics is not None,
            "errors": [{"step": k, "error": v} for k, v in sorted(snap.errors.items())],
        }
    )


TOPICS_PER_PAGE = 100


@action("list topics")
async def topics(request: web.Request) -> web.Response:
    """One page of the topics (``page``, from 0, of ``per_page``), those whose name contains
    ``q``, internal ones only with ``internal=1``: a cluster of thousands of topics is not
    sent, nor summed, whole for a page that shows a hundred."""
    snap = _console(request).sampler.snapshot
    query = request.query
    needle = query.get("q", "").lower()
    internal = query.get("internal", "0") in ("1", "true")
    per_page = min(_int_query(query.get("per_page"), TOPICS_PER_PAGE), 1000)
    page = _int_query(query.get("page"), 0)
    matched = [
        t
        for name, t in sorted(snap.topics.items())
        if needle in name.lower() and (internal or not t.is_internal)
    ]
    rows = []
    for t in matched[page * per_page : (page + 1) * per_page]:
        tps = [TopicPartition(t.name, p.partition) for p in t.partitions]
        rows.append(
            {
                "name": t.name,
                "internal": t.is_internal,
                "partitions": len(t.partitions),
                "replication_factor": max((len(p.replicas) for p in t.partitions), default=0),
                "under_replicated": under_replicated(t),
                "offline": offline(t),
                "records": sum(
                    max(0, snap.log_end.get(tp, 0) - snap.log_start.get(tp, 0)) for tp in tps
                ),
                "size": sum(snap.sizes.get(tp, 0) for tp in tps),
            }
        )
    return ok(
        {
            "taken_ms": snap.taken_ms,
            "total": len(snap.topics),
            "matched": len(matched),
            "page": page,
            "per_page": per_page,
            "topics": rows,
        }
    )


def _int_query(value: str | None, default: int) -> int:
    if value in (None, ""):
        return default
    return max(0, _int(value, "a query parameter"))


def _config_rows(configs: dict[str, ConfigEntry]) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "value": None if c.is_sensitive else c.value,
            "source": c.source.name,
            "read_only": c.read_only,
            "sensitive": c.is_sensitive,
        }
        for c in sorted(configs.values(), key=lambda c: c.name)
    ]


async def _describe_topic(admin: AIOAdmin, name: str) -> TopicDescription:
    try:
        (description,) = await admin.describe_topics([name])
    except UnknownTopicOrPartitionError:
        raise ApiError(404, f'There is no topic "{name}".', "UNKNOWN_TOPIC_OR_PARTITION") from None
    return description


@action("describe topic {name}")
async def topic(request: web.Request) -> web.Response:
    console = _console(request)
    name = request.match_info["name"]
    admin = console.admin
    description = await _describe_topic(admin, name)
    tps = [TopicPartition(name, p.partition) for p in description.partitions]
    starts = await admin.list_offsets({tp: admin.EARLIEST for tp in tps})
    ends = await admin.list_offsets({tp: admin.LATEST for tp in tps})
    sizes = console.sampler.snapshot.sizes
    try:
        configs: list[dict[str, Any]] | str = _config_rows(await admin.describe_topic_configs(name))
    except KafkaError as exc:
        configs = describe_kafka_error(exc, f"read the configs of topic {name}")[1]
    partitions = []
    for p in description.partitions:
        tp = TopicPartition(name, p.partition)
        start, end = starts.get(tp), ends.get(tp)
        partitions.append(
            {
                "partition": p.partition,
                "leader": p.leader,
                "replicas": p.replicas,
                "isr": p.isr,
                "log_start": start.offset if start else None,
                "log_end": end.offset if end else None,
                "size": sizes.get(tp),
            }
        )
    return ok(
        {
            "name": name,
            "topic_id": str(description.topic_id) if description.topic_id else None,
            "internal": description.is_internal,
            "partitions": partitions,
            "configs": configs,
            "produce_rate": console.history.rates(f"topic:{name}"),
        }
    )


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")


@action("read messages of topic {name}")
async def messages(request: web.Request) -> web.Response:
    """Records of one topic: ``partition`` (all when absent), ``from`` = newest | offset |
    time with ``offset`` / ``time`` (ms), ``limit``, ``key`` and ``q`` (substring filters on
    the key and on the value and headers, as UTF-8 text)."""
    console = _console(request)
    name = request.match_info["name"]
    query = request.query
    limit = min(_int(query.get("limit", 50), "limit", minimum=1), MAX_RECORDS)
    start_from = query.get("from", "newest")
    key_filter = query.get("key", "")
    content_filter = query.get("q", "")
    filtering = bool(key_filter or content_filter)
    description = await _describe_topic(console.admin, name)
    partitions = [p.partition for p in description.partitions]
    if query.get("partition", "") not in ("", "all"):
        wanted = _int(query["partition"], "partition", minimum=0)
        if wanted not in partitions:
            raise ApiError(404, f'Topic "{name}" has no partition {wanted}.')
        partitions = [wanted]
    tps = [TopicPartition(name, p) for p in partitions]
    admin = console.admin
    starts = {
        tp: hit.offset
        for tp, hit in (await admin.list_offsets({tp: admin.EARLIEST for tp in tps})).items()
        if hit is not None
    }
    ends = {
        tp: hit.offset
        for tp, hit in (await admin.list_offsets({tp: admin.LATEST for tp in tps})).items()
        if hit is not None
    }
    positions: dict[TopicPartition, int] = {}
    if start_from == "newest":
        back = FILTER_SCAN if filtering else limit
        for tp in tps:
            positions[tp] = max(starts.get(tp, 0), ends.get(tp, 0) - back)
    elif start_from == "offset":
        offset = _int(query.get("offset"), "offset", minimum=0)
        for tp in tps:
            positions[tp] = min(max(offset, starts.get(tp, 0)), ends.get(tp, 0))
    elif start_from == "time":
        when = _int(query.get("time"), "time (ms since the epoch)")
        found = await admin.list_offsets({tp: when for tp in tps})
        for tp in tps:
            hit = found.get(tp)
            positions[tp] = hit.offset if hit is not None else ends.get(tp, 0)
    else:
        raise ApiError(400, "from must be newest, offset or time")
    records = await _read(console, positions, ends, limit, start_from, key_filter, content_filter)
    return ok(
        {
            "topic": name,
            "partitions": [
                {"partition": tp.partition, "log_start": starts.get(tp), "log_end": ends.get(tp)}
                for tp in tps
            ],
            "records": records,
        }
    )


async def _read(
    console: Console,
    positions: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
    limit: int,
    start_from: str,
    key_filter: str,
    content_filter: str,
) -> list[dict[str, Any]]:
    todo = {tp: pos for tp, pos in positions.items() if pos < ends.get(tp, 0)}
    if not todo:
        return []
    consumer = AIOConsumer(
        bootstrap_servers=console.bootstrap,
        client_id="josefk-console",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        max_poll_records=MAX_RECORDS,
        request_timeout_ms=10_000,
        **console.client_settings,
    )
    matched: list[dict[str, Any]] = []
    # Stop once every partition reached the end it had when asked, or past the deadline;
    # from an offset or a time, also once ``limit`` records matched.
    deadline = time.monotonic() + BROWSE_DEADLINE_S
    await consumer.start()
    try:
        consumer.assign(list(todo))
        for tp, pos in todo.items():
            consumer.seek(tp, pos)
        remaining = set(todo)
        while remaining and time.monotonic() < deadline:
            if start_from != "newest" and len(matched) >= limit:
                break
            batch = await consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for r in records:
                    if r.offset >= ends[tp]:
                        break
                    if key_filter and key_filter not in _text(r.key):
                        continue
                    if content_filter and not (
                        content_filter in _text(r.value)
                        or any(
                            content_filter in k or content_filter in _text(v) for k, v in r.headers
                        )
                    ):
                        continue
                    matched.append(
                        {
                            "partition": r.partition,
                            "offset": r.offset,
                            "timestamp": r.timestamp,
                            "key": _b64(r.key),
                            "value": _b64(r.value),
                            "headers": [[k, _b64(v)] for k, v in r.headers],
                        }
                    )
            # Done with a partition once its position reached the end it had when asked
            # (by its position, not its last record: control batches and compacted-away
            # offsets leave no record at the end).
            positions = consumer.positions()
            for tp in list(remaining):
                if positions.get(tp, 0) >= ends[tp]:
                    remaining.discard(tp)
                    consumer.pause(tp)
    finally:
        await consumer.close()
    if start_from == "newest":
        matched.sort(key=lambda r: (r["timestamp"], r["offset"]), reverse=True)
    else:
        matched.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
    return matched[:limit]


async def groups(request: web.Request) -> web.Response:
    snap = _console(request).sampler.snapshot
    return ok(
        {
            "taken_ms": snap.taken_ms,
            "groups": [
                {
                    "group": g.group_id,
                    "state": g.state,
                    "type": _group_type(g),
                    "protocol_type": g.protocol_type,
                    "lag": snap.group_lag.get(g.group_id),
                }
                for g in snap.groups
            ],
        }
    )


def _group_type(group: GroupListing | GroupDescription) -> str:
    """classic, consumer (KIP-848) or share: ListGroups v5 and ConsumerGroupDescribe say so
    where the client reads them (``group_type``); a listing without it is a classic group,
    and a classic group with a protocol of its own ("connect", ...) names it."""
    kind = str(getattr(group, "group_type", "") or "classic").lower()
    if kind == "classic" and group.protocol_type not in ("consumer", ""):
        return f"classic ({group.protocol_type})"
    return kind


@action("describe group {group}")
async def group(request: web.Request) -> web.Response:
    console = _console(request)
    admin = console.admin
    group_id = request.match_info["group"]
    (description,) = await admin.describe_groups([group_id])
    committed = await admin.list_group_offsets(group_id)
    if description.state == "Dead" and not description.members and not committed:
        raise ApiError(404, f'There is no group "{group_id}".', "GROUP_ID_NOT_FOUND")
    if description.error is not None and description.error.name != "GROUP_ID_NOT_FOUND":
        raise description.error
    owner: dict[TopicPartition, str] = {}
    for member in description.members:
        for tp in member.assignment:
            owner[tp] = member.member_id
    tps = sorted(set(committed) | set(owner))
    ends = await admin.list_offsets({tp: admin.LATEST for tp in tps}) if tps else {}
    partitions = []
    total = 0
    for tp in tps:
        end = ends.get(tp)
        log_end = end.offset if end is not None else None
        offset = committed.get(tp)
        lag = max(0, log_end - offset) if log_end is not None and offset is not None else None
        total += lag or 0
        partitions.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": offset,
                "log_end_offset": log_end,
                "lag": lag,
                "member_id": owner.get(tp),
            }
        )
    return ok(
        {
            "group": group_id,
            "state": description.state,
            "type": _group_type(description),
            "protocol_type": description.protocol_type,
            "protocol": description.protocol,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": [[tp.topic, tp.partition] for tp in sorted(m.assignment)],
                }
                for m in description.members
            ],
            "partitions": partitions,
            "total_lag": total,
            "lag_history": console.history.points(f"lag:{group_id}"),
        }
    )


@action("describe broker {broker_id}")
async def broker(request: web.Request) -> web.Response:
    console = _console(request)
    broker_id = _int(request.match_info["broker_id"], "broker id")
    brokers = {b["id"]: b for b in _brokers(console.sampler.snapshot)}
    if broker_id not in brokers:
        raise ApiError(404, f"There is no live broker {broker_id}.")
    admin = console.admin
    key = (ResourceType.BROKER, str(broker_id))
    configs = (await admin.describe_configs([key]))[key]
    log_dirs = await admin.describe_log_dirs(broker_id)
    return ok(
        {
            "broker": brokers[broker_id],
            "configs": _config_rows(configs),
            "log_dirs": [
                {
                    "path": d.path,
                    "error": d.error.name if d.error else None,
                    "total_bytes": d.total_bytes,
                    "usable_bytes": d.usable_bytes,
                    "partitions": len(d.partitions),
                    "size": sum(p.size for p in d.partitions),
                    "replicas": [
                        {
                            "topic": p.topic,
                            "partition": p.partition,
                            "size": p.size,
                            "offset_lag": p.offset_lag,
                        }
                        for p in sorted(d.partitions, key=lambda p: (p.topic, p.partition))
                    ][:500],
                }
                for d in log_dirs
            ],
        }
    )


@action("list ACLs")
async def acls(request: web.Request) -> web.Response:
    admin = _console(request).admin
    try:
        bindings = await admin.describe_acls(AclBindingFilter())
    except KafkaError as exc:
        if exc.name == "SECURITY_DISABLED":
            return ok({"authorizer": False, "acls": []})
        raise
    return ok(
        {
            "authorizer": True,
            "acls": [
                {
                    "principal": b.principal,
                    "host": b.host,
                    "operation": b.operation.name,
                    "permission": b.permission.name,
                    "resource_type": b.resource_type.name,
                    "resource_name": b.resource_name,
                    "pattern_type": b.pattern_type.name,
                }
                for b in sorted(
                    bindings, key=lambda b: (b.principal, b.resource_type, b.resource_name)
                )
            ],
        }
    )


@action("list SCRAM users")
async def users(request: web.Request) -> web.Response:
    admin = _console(request).admin
    found = await admin.describe_user_scram_credentials(None)
    rows: list[dict[str, Any]] = []
    for user, info in sorted(found.items()):
        if isinstance(info, KafkaError):
            rows.append({"user": user, "error": info.name, "credentials": []})
        else:
            rows.append(
                {
                    "user": user,
                    "error": None,
                    "credentials": [{"mechanism": m, "iterations": i} for m, i in info],
                }
            )
    return ok({"users": rows})


# ---------------------------------------------------------------------- actions


async def _refreshed(console: Console) -> None:
    console.admin.client.invalidate()
    await console.sampler.refresh()


@action("create topic")
async def create_topic(request: web.Request) -> web.Response:
    console = _console(request)
    body = await _body(request)
    name = str(body.get("name", "")).strip()
    if not name:
        raise ApiError(400, "A topic needs a name.")
    configs = body.get("configs") or {}
    if not isinstance(configs, dict):
        raise ApiError(400, "configs must be an object of name: value")
    new = NewTopic(
        name,
        _int(body.get("partitions", -1), "partitions"),
        _int(body.get("replication_factor", -1), "replication factor"),
        {str(k): str(v) for k, v in configs.items()},
    )
    error = (await console.admin.create_topics([new])).get(name)
    if error is not None:
        raise error
    await _refreshed(console)
    return ok({"created": name})


@action("delete topic {name}")
async def delete_topic(request: web.Request) -> web.Response:
    console = _console(request)
    name = request.match_info["name"]
    error = (await console.admin.delete_topics([name])).get(name)
    if error is not None:
        raise error
    await _refreshed(console)
    return ok({"deleted": name})


@action("add partitions to topic {name}")
async def add_partitions(request: web.Request) -> web.Response:
    console = _console(request)
    name = request.match_info["name"]
    count = _int((await _body(request)).get("count"), "the new partition count", minimum=1)
    error = (await console.admin.create_partitions({name: count})).get(name)
    if error is not None:
        raise error
    await _refreshed(console)
    return ok({"topic": name, "partitions": count})


@action("alter a config of topic {name}")
async def alter_topic_config(request: web.Request) -> web.Response:
    console = _console(request)
    name = request.match_info["name"]
    body = await _body(request)
    key = str(body.get("name", "")).strip()
    if not key:
        raise ApiError(400, "Which config? name is missing.")
    value = body.get("value")
    await console.admin.alter_configs(
        (ResourceType.TOPIC, name), {key: None if value is None else str(value)}
    )
    return ok({"topic": name, "config": key, "value": value})


def _bytes_field(body: dict[str, Any], key: str) -> bytes | None:
    value = body.get(key)
    if value is None:
        return None
    if body.get("encoding") == "base64":
        try:
            return base64.b64decode(str(value), validate=True)
        except binascii.Error:
            raise ApiError(400, f"{key} is not valid base64") from None
    return str(value).encode()


@action("produce to topic {name}")
async def produce(request: web.Request) -> web.Response:
    console = _console(request)
    name = request.match_info["name"]
    body = await _body(request)
    partition = body.get("partition")
    headers_in = body.get("headers") or {}
    if not isinstance(headers_in, dict):
        raise ApiError(400, "headers must be an object of name: value")
    producer = await console.get_producer()
    future = await producer.send(
        name,
        _bytes_field(body, "value"),
        _bytes_field(body, "key"),
        partition=None if partition in (None, "") else _int(partition, "partition", minimum=0),
        headers=[(str(k), str(v).encode()) for k, v in headers_in.items()],
    )
    metadata = await future
    return ok({"topic": name, "partition": metadata.partition, "offset": metadata.offset})


@action("delete records of topic {name}")
async def delete_records(request: web.Request) -> web.Response:
    console = _console(request)
    name = request.match_info["name"]
    body = await _body(request)
    tp = TopicPartition(name, _int(body.get("partition"), "partition", minimum=0))
    offset = _int(body.get("offset"), "offset", minimum=-1)
    low = await console.admin.delete_records({tp: offset})
    await _refreshed(console)
    return ok({"topic": name, "partition": tp.partition, "log_start": low.get(tp)})


@action("reset the offsets of group {group}")
async def reset_offsets(request: web.Request) -> web.Response:
    """``{"to": "earliest"|"latest"|"offset"|"time", "offset": N, "time": MS, "topic": T,
    "dry_run": true}``: the dry run answers each partition's current and new offset without
    committing; without it the new offsets are committed (refused while the group has
    members)."""
    console = _console(request)
    admin = console.admin
    group_id = request.match_info["group"]
    body = await _body(request)
    to = str(body.get("to", "earliest"))
    dry_run = bool(body.get("dry_run", True))
    topic_filter = body.get("topic") or None
    (description,) = await admin.describe_groups([group_id])
    committed = await admin.list_group_offsets(group_id)
    tps = sorted(tp for tp in committed if topic_filter in (None, tp.topic))
    if topic_filter is not None and not tps:
        description_topic = await _describe_topic(admin, str(topic_filter))
        tps = [
            TopicPartition(description_topic.name, p.partition)
            for p in description_topic.partitions
        ]
    if not tps:
        raise ApiError(400, f'Group "{group_id}" has no committed offsets; name a topic to reset.')
    starts = await admin.list_offsets({tp: admin.EARLIEST for tp in tps})
    ends = await admin.list_offsets({tp: admin.LATEST for tp in tps})
    targets: dict[TopicPartition, int] = {}
    for tp in tps:
        start_hit, end_hit = starts.get(tp), ends.get(tp)
        low = start_hit.offset if start_hit is not None else 0
        high = end_hit.offset if end_hit is not None else 0
        if to == "earliest":
            targets[tp] = low
        elif to == "latest":
            targets[tp] = high
        elif to == "offset":
            targets[tp] = min(max(_int(body.get("offset"), "offset", minimum=0), low), high)
        elif to == "time":
            found = await admin.list_offsets({tp: _int(body.get("time"), "time")})
            hit = found.get(tp)
            targets[tp] = hit.offset if hit is not None else high
        else:
            raise ApiError(400, "to must be earliest, latest, offset or time")
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current": committed.get(tp),
            "new": targets[tp],
        }
        for tp in tps
    ]
    if not dry_run:
        if description.state not in IDLE_STATES or description.members:
            raise ApiError(
                409,
                f'Group "{group_id}" is {description.state} with {len(description.members)} '
                "member(s): stop its consumers first, then reset its offsets.",
                "NON_EMPTY_GROUP",
            )
        await admin.alter_group_offsets(group_id, targets)
        await _refreshed(console)
    return ok({"group": group_id, "dry_run": dry_run, "partitions": rows})


async def history(request: web.Request) -> web.Response:
    """Any series by name, ``?series=topic:orders&kind=rate|points``."""
    console = _console(request)
    name = request.query.get("series", "records_in")
    kind = request.query.get("kind", "rate")
    data = console.history.rates(name) if kind == "rate" else console.history.points(name)
    return ok({"series": name, "kind": kind, "points": data})


@web.middleware
async def same_origin_actions(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Actions only from the console's own pages or from scripts, never from another site.

    The console acts with its credentials for whoever reaches it, so a page elsewhere must not
    make a visitor's browser send it one: an action must carry a JSON body (a cross-site form
    or ``fetch`` cannot send ``application/json`` without the CORS preflight, which the
    console never answers), and a browser's ``Origin``, where sent, must be the console's own.
    """
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return await handler(request)
    origin = request.headers.get("Origin")
    if origin is not None and origin.split("://", 1)[-1] != request.host:
        return error_response(
            403, f"Actions come from the console's own pages, not from {origin}.", "FORBIDDEN"
        )
    if request.method == "POST" and request.content_type != "application/json":
        return error_response(
            415, "Actions take a JSON body (Content-Type: application/json).", "INVALID_REQUEST"
        )
    return await handler(request)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/overview", overview)
    app.router.add_get("/api/topics", topics)
    app.router.add_post("/api/topics", create_topic)
    app.router.add_get("/api/topics/{name}", topic)
    app.router.add_delete("/api/topics/{name}", delete_topic)
    app.router.add_get("/api/topics/{name}/messages", messages)
    app.router.add_post("/api/topics/{name}/records", produce)
    app.router.add_post("/api/topics/{name}/partitions", add_partitions)
    app.router.add_post("/api/topics/{name}/configs", alter_topic_config)
    app.router.add_post("/api/topics/{name}/delete-records", delete_records)
    app.router.add_get("/api/groups", groups)
    app.router.add_get("/api/groups/{group}", group)
    app.router.add_post("/api/groups/{group}/reset-offsets", reset_offsets)
    app.router.add_get("/api/brokers/{broker_id}", broker)
    app.router.add_get("/api/acls", acls)
    app.router.add_get("/api/users", users)
    app.router.add_get("/api/history", history)
