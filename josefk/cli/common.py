"""Shared plumbing of the client verbs of ``josefk``: bootstrap, errors, parsing, running.

Owns how a verb finds its broker (``--bootstrap`` on the verb, else on ``josefk`` itself,
else ``JOSEFK_BOOTSTRAP``, else 127.0.0.1:9092) and how it secures its connections
(``--command-config FILE``, a properties file as Kafka's tools take, and repeated
``-X key=value`` as kcat takes, on the verb or on ``josefk`` itself: ``client_settings``),
how a client error becomes a one-paragraph
message and exit status 1 (``CliError``), the suggestions for unknown topics and groups, and
the small parsers of ``key=value``, ``--from`` and ``--to`` specs.

Imports josefk.client and josefk.config.properties only (never josefk.broker or
josefk.storage): the command is a client like any other.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import difflib
import functools
import os
import re
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import click

from josefk.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnknownBrokerError,
    UnknownTopicOrPartitionError,
)
from josefk.client.security import PROPERTY_NAMES, ClientSecurity, security_settings
from josefk.config.properties import PropertiesSyntaxError, read_properties_file

if TYPE_CHECKING:
    # The admin client is imported by the verbs that talk to brokers, when they run:
    # ``josefk serve`` and ``josefk dump-log`` load none of it.
    from josefk.client.admin import AIOAdmin, TopicDescription

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_BOOTSTRAP: Final = "127.0.0.1:9092"
BOOTSTRAP_ENV: Final = "JOSEFK_BOOTSTRAP"
# ctx.meta key under which the ``josefk`` group leaves its own --bootstrap value.
BOOTSTRAP_META_KEY: Final = "josefk.bootstrap"
COMMAND_CONFIG_ENV: Final = "JOSEFK_COMMAND_CONFIG"
# ctx.meta key of the client settings from --command-config and -X: {(level, kind): {...}},
# level 0 for ``josefk`` itself and 1 for the verb, kind 0 for the file and 1 for -X, so
# that the verb's -X wins over the verb's file, which wins over the group's.
_CLIENT_META_KEY: Final = "josefk.client-settings"

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2

EXIT_CODES_HELP: Final = """\b
Exit codes:
  0  success
  1  the broker refused or failed the request, the broker is unreachable,
     or the arguments name something that does not exist (topic, group)
  2  usage error: unknown option, missing or malformed argument
  130  interrupted (Ctrl-C); a consumer commits what it printed first
\b
Every verb that prints data takes --json for scripts; tables are for people.
The broker address comes from --bootstrap, else JOSEFK_BOOTSTRAP, else
127.0.0.1:9092. A SASL or SSL listener needs the client's security settings:
--command-config FILE (else JOSEFK_COMMAND_CONFIG) and/or -X KEY=VALUE."""


class CliError(click.ClickException):
    """A failure worth one clear message and exit status 1."""

    exit_code = EXIT_ERROR


def bootstrap_option(f: F) -> F:
    """``-b/--bootstrap`` on a verb (overriding the one given to ``josefk`` itself), with
    the client security options (``client_config_options``)."""
    f = client_config_options(f)
    return click.option(
        "-b",
        "--bootstrap",
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT...]",
        default=None,
        help=f"Broker(s) to bootstrap from (env {BOOTSTRAP_ENV}, default {DEFAULT_BOOTSTRAP}).",
    )(f)


def _remember_settings(
    ctx: click.Context, param: click.Parameter, properties: dict[str, str], kind: int
) -> None:
    try:
        settings = security_settings(properties)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    level = 0 if ctx.parent is None else 1
    ctx.meta.setdefault(_CLIENT_META_KEY, {})[(level, kind)] = settings


def _command_config(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if not value:
        return
    try:
        properties = read_properties_file(value)
    except (OSError, PropertiesSyntaxError) as exc:
        raise click.BadParameter(
            f"cannot read {value}: {getattr(exc, 'strerror', None) or exc}", ctx=ctx, param=param
        ) from None
    _remember_settings(ctx, param, properties, 0)


def _x_settings(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
    if value:
        _remember_settings(ctx, param, parse_key_values(value, "-X"), 1)


def client_config_options(f: F, *, envvar: str | None = None) -> F:
    """``--command-config FILE`` and ``-X key=value``: how the client secures its connections
    (security.protocol, sasl.*, ssl.*); read back with ``client_settings()``. ``envvar``
    names a variable that gives the file when the option is absent."""
    f = click.option(
        "-X",
        "client_properties",
        metavar="KEY=VALUE",
        multiple=True,
        expose_value=False,
        callback=_x_settings,
        help="A client security setting, as kcat's -X (repeatable): "
        + ", ".join(sorted(set(PROPERTY_NAMES) - {"sasl.mechanisms"})),
    )(f)
    return click.option(
        "--command-config",
        metavar="FILE",
        default=None,
        envvar=envvar,
        expose_value=False,
        callback=_command_config,
        help="Properties file of client security settings, as Kafka's tools take "
        "(security.protocol, sasl.mechanism, sasl.username, sasl.password or "
        "sasl.jaas.config, ssl.ca.location, ...).",
    )(f)


def client_settings() -> dict[str, Any]:
    """The security settings given to this invocation, as ClientConfig keywords (checked:
    a bad combination is a usage error)."""
    ctx = click.get_current_context(silent=True)
    collected: dict[tuple[int, int], dict[str, str]] = (
        {} if ctx is None else ctx.meta.get(_CLIENT_META_KEY, {})
    )
    settings: dict[str, Any] = {}
    for key in sorted(collected):
        settings.update(collected[key])
    if settings:
        try:
            ClientSecurity.build(**settings)
        except ValueError as exc:
            raise click.UsageError(f"client security settings: {exc}") from None
    return settings


def option_group(
    into: str, build: Callable[..., Any], *options: Callable[[F], F]
) -> Callable[[F], F]:
    """Add ``options`` to a verb and hand their values to it as one keyword argument ``into``,
    ``build(**values)`` (a dataclass of the flags), so that verbs sharing a set of flags share
    one signature for it. The options stand in --help where the decorator stands."""

    def decorate(command: F) -> F:
        names: list[str] = []

        @functools.wraps(command)
        def with_group(*args: Any, **kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in names}
            return command(*args, **kwargs, **{into: build(**values)})

        # functools.wraps shared the command's list of click parameters: take a copy.
        params: list[click.Parameter] = list(getattr(command, "__click_params__", []))
        with_group.__click_params__ = params  # type: ignore[attr-defined]
        for option in reversed(options):
            option(with_group)
        names.extend(str(param.name) for param in params[len(params) - len(options) :])
        return cast(F, with_group)

    return decorate


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(f)


def resolve_bootstrap(value: str | None) -> str:
    """The bootstrap list: the verb's flag, the group's flag, the environment, the default.
    A malformed list is a usage error naming the bad part (``check_bootstrap``)."""
    if value:
        return check_bootstrap(value, "--bootstrap")
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        from_group = ctx.meta.get(BOOTSTRAP_META_KEY)
        if from_group:
            return check_bootstrap(str(from_group), "--bootstrap")
    from_env = os.environ.get(BOOTSTRAP_ENV)
    if from_env:
        return check_bootstrap(from_env, BOOTSTRAP_ENV)
    return DEFAULT_BOOTSTRAP


def check_bootstrap(text: str, where: str) -> str:
    """``text`` if every comma-separated entry is ``HOST:PORT`` (``[v6]:PORT`` too) with a
    port in 1..65535; else a click.BadParameter (exit 2) naming the entry and what is wrong
    with it."""
    for entry in text.split(","):
        entry = entry.strip()
        host, sep, port = entry.rpartition(":")
        problem = None
        if not sep:
            problem = "no port (expected HOST:PORT)"
        elif not port.isdigit():
            problem = f"port {port!r} is not a number"
        elif not 1 <= int(port) <= 65535:
            problem = f"port {port} is outside 1..65535"
        elif not host.strip("[]"):
            problem = "no host before the port (expected HOST:PORT)"
        if problem is not None:
            raise click.BadParameter(f"{entry!r}: {problem}", param_hint=where)
    return text


def run(coro: Coroutine[Any, Any, T], *, bootstrap: str) -> T:
    """Run one verb's coroutine; client errors become a CliError that says what to do."""
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        # Ctrl-C: the coroutine's finally blocks ran (consumers committed, producers
        # flushed); exit as shells expect after SIGINT, without a traceback.
        raise SystemExit(130) from None
    except asyncio.CancelledError:
        # SIGTERM, turned into a cancellation by the verb (see consume): same orderly exit.
        raise SystemExit(143) from None
    except UnknownBrokerError as exc:
        raise CliError(f"the cluster at {bootstrap} has no such broker: {exc.message}") from None
    except KafkaConnectionError as exc:
        hint = ""
        if "closed" in exc.message or "lost" in exc.message:
            hint = (
                "\nA SASL or SSL listener closes connections that do not authenticate: give "
                "the client's security settings with --command-config FILE or -X KEY=VALUE."
            )
        raise CliError(
            f"cannot reach a broker at {bootstrap}: {exc.message}\n"
            "Is `josefk serve` running there? Point josefk at your broker with "
            f"--bootstrap HOST:PORT or the {BOOTSTRAP_ENV} environment variable.{hint}"
        ) from None
    except KafkaTimeoutError as exc:
        raise CliError(f"the broker at {bootstrap} did not answer in time: {exc.message}") from None
    except KafkaError as exc:
        raise CliError(describe_error(exc)) from None


def describe_error(exc: KafkaError) -> str:
    context = ", ".join(f"{k}={v}" for k, v in exc.context.items())
    where = f" ({context})" if context else ""
    return f"{exc.name}: {exc.message}{where}"


# A person waits at the terminal: something at the address that does not speak Kafka, or
# nothing there, is reported within a few seconds rather than after the library's defaults.
CLI_CONNECT_TIMEOUT_MS = 3000


def admin_for(bootstrap: str) -> AIOAdmin:
    from josefk.client.admin import AIOAdmin

    return AIOAdmin(
        bootstrap_servers=bootstrap,
        client_id="josefk-cli",
        connect_timeout_ms=CLI_CONNECT_TIMEOUT_MS,
        **client_settings(),
    )


def close_names(name: str, candidates: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.5)


def unknown_error(kind: str, name: str, known: Sequence[str], listing: str) -> CliError:
    """``unknown topic "ordrs"; did you mean "orders"?`` plus how to see them all."""
    close = close_names(name, known)
    message = f'unknown {kind} "{name}"'
    if close:
        message += "; did you mean " + " or ".join(f'"{c}"' for c in close) + "?"
    elif known:
        message += f" ({len(known)} {kind}s exist; `{listing}` lists them)"
    else:
        message += f" (there are no {kind}s yet)"
    return CliError(message)


async def describe_existing_topics(
    admin: AIOAdmin, topics: Sequence[str]
) -> list[TopicDescription]:
    """Describe ``topics``; an unknown one becomes a CliError naming close matches."""
    try:
        return await admin.describe_topics(list(topics))
    except UnknownTopicOrPartitionError as exc:
        missing = str(exc.context.get("topic", topics[0] if topics else ""))
        known = await admin.list_topics(include_internal=True)
        raise unknown_error("topic", missing, known, "josefk topics list") from None


def parse_key_values(pairs: Iterable[str], what: str = "config") -> dict[str, str]:
    """``("a=1", "b=x=y")`` -> ``{"a": "1", "b": "x=y"}``; a pair without ``=`` is a usage
    error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=what)
        out[key.strip()] = value
    return out


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from ``1700000000000`` or an ISO 8601 date/time (UTC
    unless it says otherwise)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither milliseconds since the epoch nor an ISO 8601 date"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class StartSpec:
    """Where to start reading: kind is "beginning", "end", "offset" or "timestamp"."""

    kind: str
    value: int = 0

    def __str__(self) -> str:
        return self.kind if self.kind in ("beginning", "end") else f"{self.kind}:{self.value}"


_ALIASES: Final = {
    "beginning": "beginning",
    "earliest": "beginning",
    "start": "beginning",
    "end": "end",
    "latest": "end",
}


def _is_integer(text: str) -> bool:
    return text.lstrip("-").isdigit() and text.count("-") <= 1


# A bare ISO 8601 date, as Kafka's tools take one (kafka-consumer-groups.sh --to-datetime).
_ISO_DATE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_start(text: str, *, param: str = "--from", relative: bool = True) -> StartSpec:
    """``beginning|earliest``, ``end|latest``, ``offset:N``, ``timestamp:MS|ISO``, or a bare
    ISO date/time. With ``relative``: ``offset:-N`` is N records before each partition's end
    (kcat's ``-o -N``), and a bare integer is ``offset:`` that integer."""
    lowered = text.strip().lower()
    if lowered in _ALIASES:
        return StartSpec(_ALIASES[lowered])
    if relative and _is_integer(lowered):
        return StartSpec("offset", int(lowered))
    if _ISO_DATE.match(lowered):
        return StartSpec("timestamp", parse_timestamp(text.strip()))
    kind, sep, rest = text.partition(":")
    kind = kind.strip().lower()
    rest = rest.strip()
    if sep and kind == "offset" and (rest.isdigit() or (relative and _is_integer(rest))):
        return StartSpec("offset", int(rest))
    if sep and kind in ("timestamp", "time", "ts") and rest:
        return StartSpec("timestamp", parse_timestamp(rest))
    offsets = "offset:N (offset:-N: N before the end)" if relative else "offset:N"
    raise click.BadParameter(
        f"{text!r}: expected beginning, end, {offsets}, timestamp:MS or an ISO date"
        " (timestamp:ISO-DATE or ISO-DATE alone)",
        param_hint=param,
    )
