"""Writes josefk/protocol/message_types.pyi, the types of the generated message classes.

    python -m josefk.protocol.stubgen           rewrite the stub file
    python -m josefk.protocol.stubgen --check   exit 1 (saying so) when it is out of date

Run it after adding or changing a declaration in josefk/protocol/messages; the stub file is
checked in and tests/protocol/test_stubs.py fails while it differs from what this writes.
Imports only josefk.protocol modules; writes one file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from josefk.protocol.api import registry
from josefk.protocol.compiler import STUB_COMMAND, CompiledMessage, render_stubs

STUB_PATH = Path(__file__).resolve().parent / "message_types.pyi"


def expected_stubs() -> str:
    """The stub file's text as the current declarations give it."""
    messages: list[CompiledMessage] = []
    for _, entry in sorted(registry().items()):
        messages.extend((entry.request, entry.response))
    return render_stubs(messages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=STUB_COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is current")
    args = parser.parse_args(argv)
    text = expected_stubs()
    current = STUB_PATH.read_text() if STUB_PATH.exists() else ""
    if args.check:
        if current != text:
            print(f"{STUB_PATH} is out of date: run `{STUB_COMMAND}`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        STUB_PATH.write_text(text)
        print(f"wrote {STUB_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
