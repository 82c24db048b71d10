"""Declarations of every Kafka API josefk speaks, one module per API.

Each module defines ``REQUEST`` and ``RESPONSE`` (``josefk.protocol.schema.MessageSpec``)
written from Kafka's public protocol guide and KIPs. Modules are discovered, so adding an API
is adding a module. Imports only ``josefk.protocol.schema``.
"""

from __future__ import annotations

import importlib
import pkgutil

from josefk.protocol.schema import MessageSpec


def all_specs() -> list[tuple[MessageSpec, MessageSpec]]:
    """(request, response) for every declared API, ordered by api key."""
    pairs = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        pairs.append((module.REQUEST, module.RESPONSE))
    return sorted(pairs, key=lambda pair: pair[0].api_key)
