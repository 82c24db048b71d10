"""What a part of the broker implements to take new settings without a restart.

Kafka's dynamic broker configuration (KIP-226) hands changed settings to the components that
registered for them, which first validate the whole change and then apply it; a change any of
them refuses is refused as a whole and nothing is applied. This module owns only that contract
and the registry the broker keeps of such parts. The dynamic configuration itself (where
overrides are stored, DescribeConfigs and IncrementalAlterConfigs on the broker resource) lives
elsewhere and drives the registry; the parts (TLS listeners, the log cleaner...) implement
``Reconfigurable``.

Imports nothing from josefk; anything in josefk.broker may import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Set
from typing import Protocol


class ReconfigurationError(ValueError):
    """A part refused a change: the message says which setting and why, for the client."""


class Reconfigurable(Protocol):
    def reconfigurable_configs(self) -> Set[str]:
        """The Kafka property names this part applies live (``listener.name.ssl.ssl.keystore.
        location``, ``log.cleaner.threads``...)."""
        ...

    def validate_reconfiguration(self, configs: Mapping[str, str]) -> None:
        """Check a change before anything is applied; raise ``ReconfigurationError``.

        ``configs`` maps every name of ``reconfigurable_configs()`` to its effective value after
        the change (the dynamic override where one is set, else the static value), as the
        string a properties file would hold; a name with neither is absent."""
        ...

    def reconfigure(self, configs: Mapping[str, str]) -> None:
        """Apply a validated change (same mapping as ``validate_reconfiguration``). Called
        even when the values are unchanged, so that a part reading files (TLS keystores)
        reloads them: rotating a certificate in place and re-setting its path reloads it."""
        ...


class ReconfigurableRegistry:
    """The parts that take live changes, in registration order."""

    def __init__(self) -> None:
        self._parts: list[Reconfigurable] = []
        # Told of each part added: the dynamic configuration hands a part registered after
        # start-up the stored values it must start from.
        self.added_listeners: list[Callable[[Reconfigurable], None]] = []

    def add(self, part: Reconfigurable) -> None:
        self._parts.append(part)
        for listener in list(self.added_listeners):
            listener(part)

    def remove(self, part: Reconfigurable) -> None:
        self._parts.remove(part)

    def __iter__(self) -> Iterator[Reconfigurable]:
        return iter(list(self._parts))

    def configs(self) -> frozenset[str]:
        """Every property name some registered part applies live."""
        names: set[str] = set()
        for part in self._parts:
            names.update(part.reconfigurable_configs())
        return frozenset(names)
