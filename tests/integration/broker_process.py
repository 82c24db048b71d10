"""A real ``josefk serve`` process for the integration tests.

Owns starting, stopping, killing and restarting one broker process and its stderr log. The
broker is run as ``python -m josefk serve`` from this interpreter so the tests exercise the
checkout under test. Readiness is the one line the broker prints on stdout
(``josefk: listening on NAME://host:port``, its first listener); nothing here sleeps to wait for state.

Must not import josefk: the tests talk to the broker only through its process interface and
real Kafka clients.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now (another process could take it before we use it; rare)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` different ports free right now. Two ``free_port`` calls in a row can get the
    same port back (the first probe is closed before the second binds; seen: an etcd given
    one port for its client and peer listeners failed with "address already in use"), so
    every probe stays bound until all are picked."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            probe = stack.enter_context(socket.socket())
            probe.bind((host, 0))
            ports.append(int(probe.getsockname()[1]))
        return ports


READY_PATTERN = re.compile(
    r"^josefk: listening on (?P<listener>\w+)://(?P<host>[^:\s]+):(?P<port>\d+)\s*$"
)

SOURCE_DIR = Path(
    os.environ.get("JOSEFK_TEST_SOURCE_DIR") or Path(__file__).resolve().parents[2]
).resolve()

# Start-up includes interpreter start and log recovery; generous for a loaded 2-core CI box.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
STDERR_TAIL_LINES = 200

# Every BrokerProcess ever created in this pytest process and not yet closed; the conftest
# prints their stderr when a test fails.
LIVE_BROKERS: list[BrokerProcess] = []


class BrokerStartError(RuntimeError):
    """The broker exited or stayed silent before printing its ready line."""


BrokerFactory = Callable[..., "BrokerProcess"]


class BrokerProcess:
    """One ``josefk serve`` process bound to a data dir and (after the first start) a port.

    ``restart()`` reuses the data dir and asks for the same port again, so clients that cache
    the bootstrap address keep working; if that port cannot be had the broker gets a new one and
    ``bootstrap`` changes.
    """

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        *,
        settings: Sequence[str] = (),
        extra_args: Sequence[str] = (),
        host: str = "127.0.0.1",
        metrics_port: int = 0,
        command_prefix: Sequence[str] = (),
    ) -> None:
        self.data_dir = data_dir
        # Run through this first (``ip netns exec NS``: a broker in a network namespace).
        self.command_prefix = list(command_prefix)
        self.log_path = log_path
        self.settings = list(settings)
        self.extra_args = list(extra_args)
        self.host = host
        self.metrics_port = metrics_port
        self.port = 0
        self.starts = 0
        self.last_exit_code: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdout_lines: list[str] = []
        LIVE_BROKERS.append(self)

    # ------------------------------------------------------------------ addresses

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self._proc is not None, "broker not started"
        return self._proc.pid

    # ------------------------------------------------------------------ life cycle

    def command(self, port: int) -> list[str]:
        cmd = [
            *self.command_prefix,
            sys.executable,
            "-m",
            "josefk",
            "serve",
            "--listen",
            f"{self.host}:{port}",
            "--data-dir",
            str(self.data_dir),
            "--metrics-port",
            str(self.metrics_port),
        ]
        for setting in self.settings:
            cmd += ["--set", setting]
        return cmd + self.extra_args

    def start(self, *, timeout: float = START_TIMEOUT_S, port_fallback: bool = True) -> None:
        """Start the process and return once it printed its ready line.

        The port is ``self.port`` (0 on the first start: any free port); if that fails and
        ``port_fallback`` is set, any free port is taken instead.
        """
        assert not self.is_alive(), "broker already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        wanted_port = self.port
        try:
            self._spawn(wanted_port, timeout)
        except BrokerStartError:
            if wanted_port == 0 or not port_fallback:
                raise
            # The old port may be held by another process by now: take any free one.
            self._spawn(0, timeout)
        self.starts += 1

    def _spawn(self, port: int, timeout: float) -> None:
        # JOSEFK_* variables would be read as broker settings; the test decides those.
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOSEFK_")}
        env["PYTHONUNBUFFERED"] = "1"
        # The broker runs from its own directory (it must not depend on the cwd) and imports
        # josefk from SOURCE_DIR: this checkout, or JOSEFK_TEST_SOURCE_DIR to test another tree.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(SOURCE_DIR), os.environ.get("PYTHONPATH", "")) if p
        )
        with self.log_path.open("ab") as log:
            log.write(
                f"\n===== josefk serve start #{self.starts + 1}: {' '.join(self.command(port))}\n".encode()
            )
            log.flush()
            proc = subprocess.Popen(
                self.command(port),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=self.data_dir.parent,
                start_new_session=True,
            )
        self._proc = proc
        ready: queue.Queue[str | None] = queue.Queue()
        stdout_lines = self._stdout_lines = []

        def read_stdout() -> None:
            assert proc.stdout is not None
            announced = False
            for raw in proc.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                stdout_lines.append(line)
                if not announced and READY_PATTERN.match(line):
                    announced = True
                    ready.put(line)
            ready.put(None)  # EOF: the process closed stdout (normally: it exited)

        threading.Thread(target=read_stdout, name=f"josefk-stdout-{proc.pid}", daemon=True).start()
        try:
            line = ready.get(timeout=timeout)
        except queue.Empty:
            self._terminate_quietly()
            raise BrokerStartError(
                f"josefk serve printed no ready line within {timeout:.0f}s\n{self.describe()}"
            ) from None
        if line is None:
            code = proc.wait(timeout=STOP_TIMEOUT_S)
            self.last_exit_code = code
            raise BrokerStartError(
                f"josefk serve exited with code {code} before it was ready\n{self.describe()}"
            )
        match = READY_PATTERN.match(line)
        assert match is not None
        self.host = match["host"]
        self.port = int(match["port"])

    def endpoint(self, listener: str) -> str:
        """``host:port`` of the named listener, as the broker printed it when it started."""
        prefix = f"josefk: listening on {listener}://"
        for line in self._stdout_lines:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        raise KeyError(f"the broker printed no {listener} listener")

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, *, timeout: float = STOP_TIMEOUT_S, expect_code: int | None = 0) -> int:
        """SIGTERM, wait for the exit, and check it exited with ``expect_code``."""
        proc = self._proc
        assert proc is not None, "broker not started"
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)
            raise AssertionError(
                f"josefk serve did not exit within {timeout:.0f}s of SIGTERM (killed it)\n"
                f"{self.describe()}"
            ) from None
        self.last_exit_code = code
        if expect_code is not None:
            assert code == expect_code, (
                f"josefk serve exited with {code} after SIGTERM, expected {expect_code}\n"
                f"{self.describe()}"
            )
        return code

    def send_signal(self, sig: signal.Signals) -> None:
        assert self._proc is not None, "broker not started"
        self._proc.send_signal(sig)

    def wait_exit(self, *, timeout: float = STOP_TIMEOUT_S) -> int:
        """Wait for the process to exit on its own (after a signal the test sent)."""
        assert self._proc is not None, "broker not started"
        try:
            self.last_exit_code = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"josefk serve still running {timeout:.0f}s later\n{self.describe()}"
            ) from None
        return self.last_exit_code

    def kill(self) -> None:
        """SIGKILL: no shutdown work at all, as a power cut would leave the log dir."""
        proc = self._proc
        assert proc is not None, "broker not started"
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        self.last_exit_code = proc.wait(timeout=STOP_TIMEOUT_S)

    def restart(self, *, timeout: float = START_TIMEOUT_S) -> None:
        """Stop gracefully if still running, then start on the same data dir and port."""
        if self.is_alive():
            self.stop()
        self.start(timeout=timeout)

    def close(self) -> None:
        """Teardown: stop gracefully (exit code checked by the caller's stop()) or reap."""
        if self in LIVE_BROKERS:
            LIVE_BROKERS.remove(self)
        self._terminate_quietly()

    def _terminate_quietly(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)

    # ------------------------------------------------------------------ diagnostics

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        with contextlib.suppress(FileNotFoundError):
            text = self.log_path.read_text(errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return "(no stderr log)"

    def describe(self) -> str:
        state = "running" if self.is_alive() else f"exit code {self.last_exit_code}"
        if self._proc is not None and not self.is_alive():
            state = f"exit code {self._proc.returncode}"
        return (
            f"broker {self.bootstrap} data_dir={self.data_dir} ({state}); stdout: "
            f"{self._stdout_lines[-5:]!r}\n--- stderr tail ({self.log_path}) ---\n"
            f"{self.stderr_tail()}"
        )


def start_or_close(broker: BrokerProcess) -> BrokerProcess:
    """Start ``broker``; one that does not come up is reaped before the error goes on."""
    try:
        broker.start()
    except Exception:
        broker.close()
        raise
    return broker


def stop_broker(broker: BrokerProcess) -> None:
    """Teardown: a broker that was left running must still shut down cleanly (``stop`` checks
    its exit code); one that is not is reaped."""
    try:
        if broker.is_alive():
            broker.stop()
    finally:
        broker.close()


def run_josefk(bootstrap: str, *args: str, expect: int = 0) -> str:
    """``josefk ARGS -b bootstrap`` from the checkout under test, without the JOSEFK_*
    variables of this environment: its stdout, once its exit status is ``expect``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOSEFK_")}
    env["PYTHONPATH"] = str(SOURCE_DIR)
    proc = subprocess.run(
        [sys.executable, "-m", "josefk", *args, "-b", bootstrap],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == expect, proc.stderr.decode(errors="replace")
    return proc.stdout.decode()
