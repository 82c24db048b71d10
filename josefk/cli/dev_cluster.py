"""``josefk dev-cluster``: a replicated cluster on this machine, for trying things out.

Starts an etcd (the ``etcd`` program on PATH: Debian's ``etcd-server`` package) and N brokers
(``josefk serve`` processes, the same code path as a real deployment) with their data in one
folder, prints the bootstrap list once every broker serves and lists all the others in its
Metadata, starts the web console (``josefk console``, another process) and prints its URL,
and stops everything on Ctrl-C or SIGTERM (brokers with SIGTERM, so each makes a
controlled shutdown and a clean one).

Owns only process supervision; imports josefk.client's KafkaClient (to ask each broker for
Metadata) and nothing else of josefk beyond the CLI's helpers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import click

from josefk.client.cluster import KafkaClient
from josefk.client.errors import KafkaError

_READY_TIMEOUT_S = 60.0


@click.command("dev-cluster", short_help="Run etcd and N brokers on this machine.")
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 9))
@click.option(
    "--data-dir",
    default="./josefk-dev-cluster",
    show_default=True,
    type=click.Path(file_okay=False),
    help="One folder for etcd's and every broker's data.",
)
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
def dev_cluster(
    brokers: int,
    data_dir: str,
    base_port: int,
    overrides: tuple[str, ...],
    console_port: int,
    no_console: bool,
) -> None:
    """Run an etcd, --brokers brokers and the web console until Ctrl-C."""
    etcd = shutil.which("etcd")
    if etcd is None:
        raise click.ClickException(
            "etcd is not installed: install Debian's etcd-server package "
            "(sudo apt-get install etcd-server) or put an etcd binary on PATH"
        )
    root = Path(data_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    client_port, peer_port = _free_port(), _free_port()
    etcd_endpoint = f"127.0.0.1:{client_port}"
    processes: list[subprocess.Popen[bytes]] = []
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        if stopping:
            for process in processes:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            return
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        etcd_log = (root / "etcd.log").open("ab")
        processes.append(
            subprocess.Popen(
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
        )
        _wait_for_etcd(etcd_endpoint, processes[0])
        bootstrap = []
        for broker_id in range(1, brokers + 1):
            port = base_port + broker_id - 1
            log = (root / f"broker{broker_id}.log").open("ab")
            command = [
                sys.executable, "-m", "josefk", "serve",
                "--data-dir", str(root / f"broker{broker_id}"),
                "--listen", f"127.0.0.1:{port}",
                "--metrics-port", "0",
                "--set", f"broker.id={broker_id}",
                "--set", f"josefk.etcd.endpoints={etcd_endpoint}",
            ]  # fmt: skip
            # The controller creates __consumer_offsets and __transaction_state once this
            # many brokers live; a cluster of one or two would otherwise never coordinate a
            # group or a transaction.
            for internal in ("offsets.topic", "transaction.state.log"):
                if not any(o.startswith(f"{internal}.replication.factor=") for o in overrides):
                    command += ["--set", f"{internal}.replication.factor={min(3, brokers)}"]
            if not any(o.startswith("transaction.state.log.min.isr=") for o in overrides):
                # min.insync.replicas of __transaction_state: at most its replica count.
                command += ["--set", f"transaction.state.log.min.isr={min(2, brokers)}"]
            for item in overrides:
                command += ["--set", item]
            processes.append(
                subprocess.Popen(
                    command, stdout=subprocess.PIPE, stderr=log, start_new_session=True
                )
            )
            bootstrap.append(f"127.0.0.1:{port}")
        for broker_id in range(1, brokers + 1):
            # A broker prints its one stdout line once it has joined the cluster and serves.
            stdout = processes[broker_id].stdout
            assert stdout is not None
            line = stdout.readline().decode(errors="replace")
            if "listening on" not in line:
                raise click.ClickException(
                    f"broker {broker_id} did not start; see {root / f'broker{broker_id}.log'}"
                )
        _wait_until_whole(bootstrap, brokers)
        click.echo(f"etcd at {etcd_endpoint}; data and logs in {root}")
        click.echo(f"bootstrap: {','.join(bootstrap)}")
        if not no_console:
            console = _start_console(bootstrap, console_port, root)
            processes.append(console)
            stdout = console.stdout
            assert stdout is not None
            line = stdout.readline().decode(errors="replace").strip()
            if not line.startswith("josefk console: "):
                raise click.ClickException(f"the console did not start; see {root / 'console.log'}")
            click.echo(f"console: {line.split()[2]}")
        click.echo("Ctrl-C stops the cluster.")
        while not stopping and all(p.poll() is None for p in processes):
            time.sleep(0.2)
        for process in processes:
            if process.poll() is not None and not stopping:
                click.echo(f"a process exited with {process.returncode}; stopping", err=True)
    finally:
        # Brokers first (each hands its leaderships over through etcd), etcd once they are
        # gone: stopped together, a broker's controlled shutdown lost etcd half way.
        # The console (last started) goes with the brokers: it is only a client.
        brokers_then_etcd = [processes[1:], processes[:1]]
        for group in brokers_then_etcd:
            for process in group:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in group:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
        click.echo("stopped")


def _start_console(bootstrap: list[str], port: int, root: Path) -> subprocess.Popen[bytes]:
    log = (root / "console.log").open("ab")
    command = [
        sys.executable, "-m", "josefk", "console",
        "--bootstrap", ",".join(bootstrap), "--listen", f"127.0.0.1:{port}",
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, start_new_session=True)


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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
