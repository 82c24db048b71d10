"""The configuration reference, made from the declarations: ``josefk serve --help-config`` and
docs/configuration.md (a test regenerates the page and fails on a difference).

Owns ``reference_markdown`` and ``help_text``. Reads josefk.config.broker's and
josefk.config.topic's declarations; must not import anything outside josefk.config.
"""

from __future__ import annotations

from collections.abc import Iterable

from josefk.config.broker import BROKER_KEYS, INERT_PREFIXES, REFUSED_KEY_REASONS, REFUSED_PREFIXES
from josefk.config.definitions import ConfigKey, Support
from josefk.config.topic import TOPIC_KEYS

__all__ = ["help_text", "reference_markdown"]

REGENERATE = "python -m josefk.config.reference > docs/configuration.md"


def _cell(text: str | None) -> str:
    if text is None:
        return "null"
    if text == "":
        return '""'
    return text.replace("|", "\\|")


def _valid(text: str) -> str:
    """The valid-values cell: empty when the type says it all."""
    return text.replace("|", "\\|")


def _honoured(keys: Iterable[ConfigKey]) -> list[ConfigKey]:
    return [k for k in keys if k.support is Support.HONOURED]


def _inert(keys: Iterable[ConfigKey]) -> list[ConfigKey]:
    return [k for k in keys if k.support is Support.INERT]


def reference_markdown() -> str:
    """docs/configuration.md."""
    broker = sorted(BROKER_KEYS.values(), key=lambda k: k.name)
    topic = sorted(TOPIC_KEYS.values(), key=lambda k: k.name)
    lines = [
        "# Configuration reference",
        "",
        f"Generated from the declarations in `josefk/config/` by `{REGENERATE}`;",
        "`tests/config/test_reference.py` fails when this page and the declarations differ.",
        "`josefk serve --help-config` prints the same list. Key names, types and defaults are",
        "Kafka's (4.x) unless a description says otherwise.",
        "",
        "Each key is one of:",
        "",
        "- **honoured**: josefk does what Kafka does with it;",
        "- **inert**: accepted (in `server.properties`, `--set`, `JOSEFK_*`, AlterConfigs where",
        "  it is dynamic, a topic's configs), stored and described with its source, but it",
        "  changes nothing here, for the reason given; the broker logs a line saying so;",
        "- **refused**: a user who sets it would rely on an effect josefk cannot give: start-up,",
        "  CreateTopics and AlterConfigs refuse it, naming the reason.",
        "",
        "Update mode (broker keys): `read-only` needs a restart; `per-broker` may be changed by",
        'AlterConfigs/IncrementalAlterConfigs on one broker (`BROKER "<id>"`); `cluster-wide`',
        'also at the cluster default (`BROKER ""`); `per-broker, listener prefix` only as',
        "`listener.name.<listener>.<key>`. Sensitive values are never shown by DescribeConfigs.",
        "",
        "## Broker configs",
        "",
        "| Key | Type | Default | Valid values | Update mode | Description |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key in _honoured(broker):
        doc = key.doc + (" (sensitive)" if key.sensitive else "")
        lines.append(
            f"| `{key.name}` | {key.type} | {_cell(key.default)} | {_valid(key.valid)}"
            f" | {key.dynamic.value} | {_cell(doc)} |"
        )
    lines += [
        "",
        "## Broker configs accepted as inert",
        "",
        "| Key | Update mode | Why it changes nothing here |",
        "| --- | --- | --- |",
    ]
    for key in _inert(broker):
        lines.append(f"| `{key.name}` | {key.dynamic.value} | {_cell(key.reason)} |")
    lines += [
        "",
        "Any other key under these prefixes is accepted as inert too:",
        "",
        "| Prefix | Why |",
        "| --- | --- |",
    ]
    for prefix, reason in sorted(INERT_PREFIXES.items()):
        lines.append(f"| `{prefix}` | {_cell(reason)} |")
    lines += [
        "",
        "## Broker configs refused",
        "",
        "| Key or prefix | Reason |",
        "| --- | --- |",
    ]
    for name, reason in sorted(REFUSED_KEY_REASONS.items()):
        lines.append(f"| `{name}` | {_cell(reason)} |")
    for prefix, reason in sorted(REFUSED_PREFIXES.items()):
        lines.append(f"| `{prefix}*` (other keys) | {_cell(reason)} |")
    lines += [
        "",
        "`remote.log.storage.system.enable=false` is accepted as inert; `true` is refused.",
        "",
        "## Topic configs",
        "",
        "Every topic key may be set at creation and altered per topic (AlterConfigs,",
        "IncrementalAlterConfigs). `remote.storage.enable=true` is refused (no tiered storage).",
        "",
        "| Key | Type | Default | Valid values | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key in _honoured(topic):
        lines.append(
            f"| `{key.name}` | {key.type} | {_cell(key.default)} | {_valid(key.valid)}"
            f" | {_cell(key.doc)} |"
        )
    lines += [
        "",
        "## Topic configs accepted as inert",
        "",
        "| Key | Why it changes nothing here |",
        "| --- | --- |",
    ]
    for key in _inert(topic):
        lines.append(f"| `{key.name}` | {_cell(key.reason)} |")
    return "\n".join(lines) + "\n"


def help_text() -> str:
    """``josefk serve --help-config``: every broker key with its default, update mode and
    documentation; then the topic keys."""
    out = ["Broker configs (KEY  default  update mode): documentation", ""]
    for key in sorted(BROKER_KEYS.values(), key=lambda k: k.name):
        out.append(f"{key.name}  {_cell(key.default)}  {key.dynamic.value}")
        if key.support is Support.INERT:
            out.append(f"    inert: {key.reason}")
        else:
            out.append(f"    {key.doc}")
    out.append("")
    for prefix, reason in sorted(INERT_PREFIXES.items()):
        out.append(f"{prefix}*  inert: {reason}")
    for name, reason in sorted({**REFUSED_KEY_REASONS, **REFUSED_PREFIXES}.items()):
        out.append(f"{name}  refused: {reason}")
    out += ["", "Topic configs (KEY  default): documentation", ""]
    for key in sorted(TOPIC_KEYS.values(), key=lambda k: k.name):
        out.append(f"{key.name}  {_cell(key.default)}")
        out.append(f"    inert: {key.reason}" if key.support is Support.INERT else f"    {key.doc}")
    out += ["", "The same list as a page: docs/configuration.md."]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
