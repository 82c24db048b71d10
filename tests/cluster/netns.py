"""Network namespaces for the partition tests: a way to cut one broker off on this machine.

Each broker runs in a namespace of its own. It is linked by a veth pair to the test's own
namespace (where etcd and the clients run, at two addresses added to its loopback device) and by a
veth pair to every other broker, so every packet crosses exactly one link and none is ever
forwarded (a host with Docker drops forwarded bridge traffic). ``isolate(i)`` turns broker
i's routes to etcd and to the other brokers, and theirs to it, into ``prohibit`` routes, and
etcd's replies to it into a ``prohibit`` rule: broker i then reaches no one but the clients,
and the clients still reach it, as in Jepsen's partitions that leave a leader writable by
some clients. ``heal(i)`` puts the routes back.

Needs root and iproute2 (``ip netns``); ``unavailable()`` says why a machine cannot.
Must not import josefk.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from itertools import combinations

__all__ = ["Mesh", "unavailable"]


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    probe = f"jkprobe{uuid.uuid4().hex[:6]}"
    try:
        _ip("netns", "add", probe)
    except subprocess.CalledProcessError as exc:
        return f"ip netns add failed: {exc.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


class Mesh:
    """``brokers`` namespaces fully linked to each other and to the test's namespace."""

    def __init__(self, brokers: int) -> None:
        self.brokers = brokers
        tag = os.getpid() % 200 + 20  # one subnet and one set of names per test process
        self._tag = tag
        self._base = f"10.{tag}"
        self.client_ip = f"{self._base}.0.1"
        self.etcd_ip = f"{self._base}.0.2"
        self._isolated: set[int] = set()

    def ns(self, broker: int) -> str:
        return f"jk{self._tag}b{broker}"

    def broker_ip(self, broker: int) -> str:
        return f"{self._base}.1.{broker}"

    def exec_prefix(self, broker: int) -> list[str]:
        """Run a command inside the broker's namespace (``ip netns exec`` execs it in place,
        so the process id and signals are the command's own)."""
        return ["ip", "netns", "exec", self.ns(broker)]

    def _pair(self, a: int, b: int) -> str:
        return f"jk{self._tag}p{a}{b}"

    def up(self) -> Mesh:
        try:
            self._up()
        except subprocess.CalledProcessError as exc:
            self.down()
            raise RuntimeError(f"building the namespaces failed: {exc.stderr.strip()}") from exc
        return self

    def _up(self) -> None:
        # On the loopback device: some kernels have no dummy interfaces; the address answers
        # ARP on any link all the same.
        for address in (self.client_ip, self.etcd_ip):
            _ip("addr", "add", f"{address}/32", "dev", "lo")
        for b in range(1, self.brokers + 1):
            ns, host_end, ns_end = self.ns(b), f"jk{self._tag}h{b}", f"jk{self._tag}n{b}"
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{self.broker_ip(b)}/32", "dev", ns_end)
            _ip("-n", ns, "link", "set", ns_end, "up")
            _ip("link", "set", host_end, "up")
            _ip("route", "add", f"{self.broker_ip(b)}/32", "dev", host_end, "src", self.client_ip)
            _ip("-n", ns, "route", "add", f"{self._base}.0.0/24", "dev", ns_end)
        for a, b in combinations(range(1, self.brokers + 1), 2):
            _ip(
                "link", "add", self._pair(a, b), "netns", self.ns(a),
                "type", "veth", "peer", "name", self._pair(b, a), "netns", self.ns(b),
            )  # fmt: skip
            for here, there in ((a, b), (b, a)):
                _ip("-n", self.ns(here), "link", "set", self._pair(here, there), "up")
                _ip(
                    "-n", self.ns(here), "route", "add", f"{self.broker_ip(there)}/32",
                    "dev", self._pair(here, there),
                )  # fmt: skip

    def isolate(self, broker: int) -> None:
        """Cut ``broker`` off from etcd and every other broker; clients still reach it."""
        ns = self.ns(broker)
        _ip("-n", ns, "route", "replace", "prohibit", f"{self.etcd_ip}/32")
        for other in range(1, self.brokers + 1):
            if other == broker:
                continue
            _ip("-n", ns, "route", "replace", "prohibit", f"{self.broker_ip(other)}/32")
            _ip(
                "-n", self.ns(other), "route", "replace", "prohibit", f"{self.broker_ip(broker)}/32"
            )
        _ip("rule", "add", "from", self.etcd_ip, "to", self.broker_ip(broker), "prohibit")
        self._isolated.add(broker)

    def heal(self, broker: int) -> None:
        ns = self.ns(broker)
        _ip("-n", ns, "route", "del", "prohibit", f"{self.etcd_ip}/32", check=False)
        for other in range(1, self.brokers + 1):
            if other == broker:
                continue
            for here, there in ((broker, other), (other, broker)):
                _ip(
                    "-n", self.ns(here), "route", "replace", f"{self.broker_ip(there)}/32",
                    "dev", self._pair(here, there),
                )  # fmt: skip
        _ip("rule", "del", "from", self.etcd_ip, "to", self.broker_ip(broker), "prohibit",
            check=False)  # fmt: skip
        self._isolated.discard(broker)

    def down(self) -> None:
        for broker in list(self._isolated):
            self.heal(broker)
        for b in range(1, self.brokers + 1):
            # Deleting a namespace deletes its ends of every veth pair, and so the pairs.
            _ip("netns", "del", self.ns(b), check=False)
            _ip("route", "del", f"{self.broker_ip(b)}/32", check=False)
        for address in (self.client_ip, self.etcd_ip):
            _ip("addr", "del", f"{address}/32", "dev", "lo", check=False)
