"""Every generated message class under its own name, for imports and annotations.

``from josefk.protocol.message_types import ProduceRequest, ProduceResponse`` gives the
classes ``request_class`` / ``response_class`` return, one per declared message, with their
struct classes as attributes (``ProduceRequest.TopicProduceData``). The classes are built at
run time from the declarations in josefk/protocol/messages; mypy reads their types from
``message_types.pyi`` beside this file, which the compiler writes
(``python -m josefk.protocol.stubgen``) and tests/protocol/test_stubs.py keeps current.

Imports only josefk.protocol.api; no I/O.
"""

from __future__ import annotations

from josefk.protocol.api import registry


def _export() -> None:
    for entry in registry().values():
        for compiled in (entry.request, entry.response):
            globals()[compiled.name] = compiled.cls


_export()
