"""``josefk dev-cluster``: a replicated cluster on this machine, for trying things out.

Starts an etcd (the ``etcd`` program on PATH: Debian's ``etcd-server`` package) and N brokers
(``josefk serve`` processes, the same code path as a real deployment) with their data in one
folder, prints the bootstrap list and each broker's metrics port once every broker serves and
lists all the others in its Metadata, starts the web console (``josefk console``, another
process) and prints its URL, and stops everything on Ctrl-C or SIGTERM (brokers with
SIGTERM, so each makes a controlled shutdown and a clean one).

It is where people try failover, so a broker that dies (``kill -9``) is reported and the others
go on; it is started again with the ``r`` key (every broker that is down) or, from another
terminal, ``josefk dev-cluster restart-broker N`` (a running broker is stopped first). That
verb talks to the supervisor through files in the data dir: ``dev-cluster.json`` (written by
the supervisor: its pid, etcd, each broker's ports, pid and state) and a request file
``restart-broker-N`` the supervisor removes once it has acted on it. etcd exiting stops the
cluster: nothing works without it.

Owns only process supervision; imports josefk.client's KafkaClient (to ask each broker for
Metadata) and nothing else of josefk beyond the CLI's helpers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import termios
import time
import tty
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import click

from josefk.client.cluster import KafkaClient
from josefk.client.errors import KafkaError
from josefk.util.ports import free_ports

_READY_TIMEOUT_S = 60.0
# How often the supervisor looks at its processes, its request files and the keyboard.
_TICK_S = 0.2
STATE_FILE = "dev-cluster.json"
_DATA_DIR_OPTION = click.option(
    "--data-dir",
    default="./josefk-dev-cluster",
    show_default=True,
    type=click.Path(file_okay=False),
    help="One folder for etcd's and every broker's data.",
)


def _restart_request(root: Path, broker_id: int) -> Path:
    return root / f"restart-broker-{broker_id}"


@dataclass
class _Broker:
    """One broker the supervisor runs: its fixed ports and its current process."""

    broker_id: int
    port: int
    metrics_port: int
    command: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    # Set once its exit was reported, so that it is reported once.
    reported: bool = False
    last_error: str | None = field(default=None)

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command, stdout=subprocess.PIPE, stderr=log, start_new_session=True
            )
        self.reported = False
        self.last_error = None

    def wait_ready(self) -> bool:
        """Until the broker prints its one stdout line (it has joined the cluster and serves);
        False, with ``last_error`` from its log, when it exits first."""
        assert self.process is not None and self.process.stdout is not None
        line = self.process.stdout.readline().decode(errors="replace")
        if "listening on" in line:
            return True
        self.process.wait()
        self.reported = True
        self.last_error = _last_error(self.log_path)
        return False

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = 30) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def state(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "metrics_port": self.metrics_port,
            "pid": self.process.pid if self.process is not None else None,
            "state": "running" if self.running() else "exited",
            "returncode": None if self.process is None else self.process.poll(),
            "error": self.last_error,
        }

    def failure(self) -> str:
        cause = f": {self.last_error}" if self.last_error else ""
        return f"broker {self.broker_id} did not start{cause} (log: {self.log_path})"


def _last_error(log_path: Path) -> str | None:
    """The last ERROR line a broker logged (its start-up refusal, say), without the
    timestamp and logger name."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines[-200:]):
        if " ERROR " in line or line.startswith("Error:"):
            return line.split(": ", 1)[1] if ": " in line else line
    return None


def _exit_cause(returncode: int | None) -> str:
    if returncode is None:
        return "is running"
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-returncode).name}"
        return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        # As the broker binds: a port whose old connections linger in TIME_WAIT is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@click.group(
    "dev-cluster",
    invoke_without_command=True,
    short_help="Run etcd and N brokers on this machine.",
)
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 9))
@_DATA_DIR_OPTION
@click.option(
    "--base-port",
    default=9092,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="Broker N listens on base-port + N - 1.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A broker property for every broker (repeatable).",
)
@click.option(
    "--console-port",
    default=8080,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port of the web console on 127.0.0.1 (0: any free port).",
)
@click.option("--no-console", is_flag=True, help="Do not start the web console.")
@click.pass_context
def dev_cluster(
    ctx: click.Context,
    brokers: int,
    data_dir: str,
    base_port: int,
    overrides: tuple[str, ...],
    console_port: int,
    no_console: bool,
) -> None:
    """Run an etcd, --brokers brokers and the web console until Ctrl-C.

    A broker that dies is reported and the others go on: press r to start every broker that
    is down again, or run `josefk dev-cluster restart-broker N` from another terminal.
    """
    if ctx.invoked_subcommand is not None:
        return
    etcd = shutil.which("etcd")
    if etcd is None:
        raise click.ClickException(
            "etcd is not installed: install Debian's etcd-server package "
            "(sudo apt-get install etcd-server) or put an etcd binary on PATH"
        )
    ports = [base_port + broker_id - 1 for broker_id in range(1, brokers + 1)]
    if ports[-1] > 65535:
        raise click.BadParameter(
            f"broker {brokers} would listen on {ports[-1]}", param_hint="--base-port"
        )
    taken = [port for port in ports if _port_in_use(port)]
    if taken:
        raise click.ClickException(
            f"port {', '.join(map(str, taken))} on 127.0.0.1 is already in use (Address already "
            "in use: another broker or dev-cluster?); stop it or choose another --base-port"
        )
    root = Path(data_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    client_port, peer_port, *metrics_ports = free_ports(2 + brokers)
    etcd_endpoint = f"127.0.0.1:{client_port}"
    etcd_process: subprocess.Popen[bytes] | None = None
    console: subprocess.Popen[bytes] | None = None
    members: list[_Broker] = []
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        if stopping:
            for member in members:
                if member.process is not None:
                    with contextlib.suppress(ProcessLookupError):
                        member.process.kill()
            return
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    state_path = root / STATE_FILE

    def write_state() -> None:
        state = {
            "pid": os.getpid(),
            "etcd": etcd_endpoint,
            "brokers": {str(m.broker_id): m.state() for m in members},
        }
        temporary = state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=2))
        temporary.replace(state_path)

    keyboard = _Keyboard(sys.stdin)
    try:
        etcd_log = (root / "etcd.log").open("ab")
        etcd_process = subprocess.Popen(
            [
                etcd,
                "--name",
                "josefk-dev",
                "--data-dir",
                str(root / "etcd"),
                "--listen-client-urls",
                f"http://{etcd_endpoint}",
                "--advertise-client-urls",
                f"http://{etcd_endpoint}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"josefk-dev=http://127.0.0.1:{peer_port}",
            ],
            stdout=etcd_log,
            stderr=etcd_log,
            start_new_session=True,
        )
        _wait_for_etcd(etcd_endpoint, etcd_process)
        for request in root.glob("restart-broker-*"):
            request.unlink()  # left by an earlier run: acted on by nobody
        listeners = zip(ports, metrics_ports, strict=True)
        for broker_id, (port, metrics_port) in enumerate(listeners, start=1):
            command = [
                sys.executable, "-m", "josefk", "serve",
                "--data-dir", str(root / f"broker{broker_id}"),
                "--listen", f"127.0.0.1:{port}",
                "--metrics-port", str(metrics_port),
                "--set", f"broker.id={broker_id}",
                "--set", f"josefk.etcd.endpoints={etcd_endpoint}",
            ]  # fmt: skip
            # The controller creates __consumer_offsets and __transaction_state once this
            # many brokers live; a cluster of one or two would otherwise never coordinate a
            # group or a transaction.
            for internal in (
                "offsets.topic",
                "transaction.state.log",
                "share.coordinator.state.topic",
            ):
                if not any(o.startswith(f"{internal}.replication.factor=") for o in overrides):
                    command += ["--set", f"{internal}.replication.factor={min(3, brokers)}"]
            for min_isr in (
                "transaction.state.log.min.isr",
                "share.coordinator.state.topic.min.isr",
            ):
                if not any(o.startswith(f"{min_isr}=") for o in overrides):
                    # min.insync.replicas of the internal topic: at most its replica count.
                    command += ["--set", f"{min_isr}={min(2, brokers)}"]
            for item in overrides:
                command += ["--set", item]
            member = _Broker(
                broker_id, port, metrics_port, command, root / f"broker{broker_id}.log"
            )
            member.start()
            members.append(member)
        failed = [member for member in members if not member.wait_ready()]
        if failed:
            raise click.ClickException("\n".join(member.failure() for member in failed))
        bootstrap = [f"127.0.0.1:{member.port}" for member in members]
        _wait_until_whole(bootstrap, brokers)
        console_url = None
        if not no_console:
            console = _start_console(bootstrap, console_port, root)
            stdout = console.stdout
            assert stdout is not None
            line = stdout.readline().decode(errors="replace").strip()
            if not line.startswith("josefk console: "):
                raise click.ClickException(f"the console did not start; see {root / 'console.log'}")
            console_url = line.split()[2]
        write_state()
        click.echo(f"etcd at {etcd_endpoint}; data and logs in {root}")
        for member in members:
            click.echo(
                f"broker {member.broker_id}: 127.0.0.1:{member.port}, metrics "
                f"http://127.0.0.1:{member.metrics_port}/metrics"
            )
        click.echo(f"bootstrap: {','.join(bootstrap)}")
        if console_url is not None:
            click.echo(f"console: {console_url}")
        restart_hint = "r restarts a broker that is down; " if keyboard.active else ""
        click.echo(f"{restart_hint}Ctrl-C stops the cluster.")
        while not stopping:
            if etcd_process.poll() is not None:
                click.echo(
                    f"etcd {_exit_cause(etcd_process.returncode)}; stopping the cluster "
                    f"(log: {root / 'etcd.log'})",
                    err=True,
                )
                break
            changed = False
            for member in members:
                if not member.running() and not member.reported:
                    member.reported = True
                    changed = True
                    assert member.process is not None
                    click.echo(
                        f"broker {member.broker_id} {_exit_cause(member.process.returncode)}; "
                        "the others go on. Restart it with "
                        + ("r or " if keyboard.active else "")
                        + f"`josefk dev-cluster restart-broker {member.broker_id} "
                        f"--data-dir {root}` (log: {member.log_path})",
                        err=True,
                    )
            wanted = [m for m in members if _restart_request(root, m.broker_id).exists()]
            if keyboard.pressed(_TICK_S) == "r":
                wanted += [m for m in members if not m.running() and m not in wanted]
                if not wanted:
                    click.echo("every broker is running", err=True)
            for member in wanted:
                if stopping:
                    break
                _restart(member)
                _restart_request(root, member.broker_id).unlink(missing_ok=True)
                changed = True
            if changed:
                write_state()
    finally:
        keyboard.close()
        # The console first: it is only a client.
        if console is not None and console.poll() is None:
            console.send_signal(signal.SIGTERM)
            try:
                console.wait(timeout=30)
            except subprocess.TimeoutExpired:
                console.kill()
        # Brokers first (each hands its leaderships over through etcd), etcd once they are
        # gone: stopped together, a broker's controlled shutdown lost etcd half way.
        for member in members:
            if member.running():
                assert member.process is not None
                member.process.send_signal(signal.SIGTERM)
        for member in members:
            member.stop()
        if etcd_process is not None:
            if etcd_process.poll() is None:
                etcd_process.send_signal(signal.SIGTERM)
            try:
                etcd_process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                etcd_process.kill()
        state_path.unlink(missing_ok=True)
        click.echo("stopped")


def _start_console(bootstrap: list[str], port: int, root: Path) -> subprocess.Popen[bytes]:
    with (root / "console.log").open("ab") as log:
        command = [
            sys.executable, "-m", "josefk", "console",
            "--bootstrap", ",".join(bootstrap), "--listen", f"127.0.0.1:{port}",
        ]  # fmt: skip
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, start_new_session=True)


def _restart(member: _Broker) -> None:
    """Stop ``member`` if it runs, start it again and wait until it serves."""
    if member.running():
        click.echo(f"stopping broker {member.broker_id}", err=True)
        member.stop()
    click.echo(f"starting broker {member.broker_id}", err=True)
    member.start()
    if member.wait_ready():
        click.echo(f"broker {member.broker_id} is back on 127.0.0.1:{member.port}", err=True)
    else:
        click.echo(member.failure(), err=True)


class _Keyboard:
    """Single key presses on the terminal (cbreak mode, restored at ``close``) when stdin is
    one; nothing otherwise. Read with select on the descriptor, never through a thread: a
    thread blocked in a buffered read aborts Python at exit (see josefk produce)."""

    def __init__(self, stream: IO[str]) -> None:
        self._fd: int | None = None
        self._saved: list[Any] | None = None
        with contextlib.suppress(OSError, ValueError, AttributeError, termios.error):
            if stream.isatty():
                fd = stream.fileno()
                self._saved = termios.tcgetattr(fd)
                tty.setcbreak(fd)
                self._fd = fd

    @property
    def active(self) -> bool:
        return self._fd is not None

    def pressed(self, timeout_s: float) -> str | None:
        """The key pressed within ``timeout_s`` (lowercased), or None; waits the timeout
        when there is no terminal, so that it paces the supervisor's loop either way."""
        if self._fd is None:
            time.sleep(timeout_s)
            return None
        try:
            readable, _, _ = select.select([self._fd], [], [], timeout_s)
        except InterruptedError:
            return None
        if not readable:
            return None
        data = os.read(self._fd, 16)
        if not data:
            self.close()
            return None
        return data.decode(errors="replace")[-1:].lower()

    def close(self) -> None:
        if self._fd is not None and self._saved is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
        self._fd = None


@dev_cluster.command("restart-broker", short_help="Restart one broker of a running dev-cluster.")
@click.argument("broker_id", metavar="N", type=click.IntRange(min=1))
@_DATA_DIR_OPTION
def restart_broker(broker_id: int, data_dir: str) -> None:
    """Ask the dev-cluster running on --data-dir to start broker N again (stopping it first
    if it runs), and wait until it serves."""
    root = Path(data_dir).resolve()
    state = _read_state(root)
    if str(broker_id) not in state["brokers"]:
        raise click.BadParameter(
            f"the dev-cluster on {root} has brokers {', '.join(sorted(state['brokers']))}",
            param_hint="N",
        )
    request = _restart_request(root, broker_id)
    request.touch()
    deadline = time.monotonic() + 2 * _READY_TIMEOUT_S
    while request.exists():
        if time.monotonic() > deadline:
            raise click.ClickException(f"the dev-cluster did not restart broker {broker_id}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(state["pid"]), 0)
            time.sleep(_TICK_S)  # the supervisor acts within a tick, then removes the file
            continue
        request.unlink(missing_ok=True)
        raise click.ClickException(f"the dev-cluster on {root} stopped")
    broker = _read_state(root)["brokers"][str(broker_id)]
    if broker["state"] != "running":
        raise click.ClickException(
            f"broker {broker_id} did not start: {broker['error'] or 'see its log'}"
        )
    click.echo(f"broker {broker_id} restarted: 127.0.0.1:{broker['port']} (pid {broker['pid']})")


def _read_state(root: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads((root / STATE_FILE).read_text())
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError):
        raise click.ClickException(
            f"no dev-cluster is running on {root} (start one with `josefk dev-cluster "
            f"--data-dir {root}`)"
        ) from None
    return state


def _wait_until_whole(bootstrap: list[str], brokers: int) -> None:
    """Return once every broker's Metadata lists all ``brokers``: each one printed its ready
    line after registering, but may not have seen the others' registrations yet, and a client
    given the bootstrap list at once would find brokers missing."""

    async def whole(address: str) -> bool:
        client = KafkaClient(bootstrap_servers=address)
        try:
            response = await client.fetch_metadata([])
            return len(response.brokers) >= brokers
        except KafkaError:
            return False
        finally:
            await client.close()

    async def wait() -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while not all([await whole(address) for address in bootstrap]):
            if time.monotonic() > deadline:
                raise click.ClickException(
                    f"the brokers did not all see each other within {_READY_TIMEOUT_S:.0f}s"
                )
            # A person waits at start-up here, not the broker: a short poll is fine.
            await asyncio.sleep(0.1)

    asyncio.run(wait())


def _wait_for_etcd(endpoint: str, process: subprocess.Popen[bytes]) -> None:
    """Until etcd's /health says it serves: its client port opens before it has elected
    itself leader, and a broker that connects then gets no answer and refuses to start."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise click.ClickException(f"etcd exited with {process.returncode}; see its log")
        with (
            contextlib.suppress(OSError, ValueError),
            urllib.request.urlopen(f"http://{endpoint}/health", timeout=0.5) as answer,
        ):
            if json.loads(answer.read()).get("health") == "true":
                return
        time.sleep(0.1)
    raise click.ClickException(f"etcd at {endpoint} was not healthy within {_READY_TIMEOUT_S:.0f}s")
