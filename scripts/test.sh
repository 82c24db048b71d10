#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine, then run the whole suite.
#   ./scripts/test.sh            all tests
#   ./scripts/test.sh -k index   any pytest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# kcat is one of the real Kafka clients the integration tests drive.
if ! command -v kcat >/dev/null 2>&1; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi

# KafkaJS, for the JavaScript client tests. Some of this project's machines cannot reach the
# npm registry: say so in one line and go on; tests/integration/test_kafkajs.py skips with
# that reason (read from tests/js/.npm-unavailable).
if [ -f tests/js/package.json ]; then
    rm -f tests/js/.npm-unavailable
    if ! command -v npm >/dev/null 2>&1; then
        echo "npm is not installed" >tests/js/.npm-unavailable
    elif ! (cd tests/js && timeout 300 npm install --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
        echo "npm install failed: the npm registry cannot be reached from this machine" >tests/js/.npm-unavailable
    fi
    [ -f tests/js/.npm-unavailable ] && echo "KafkaJS tests will skip: $(cat tests/js/.npm-unavailable)"
fi

python=${PYTHON:-python3}
if [ -z "${VIRTUAL_ENV:-}" ]; then
    [ -x .venv/bin/python ] || "$python" -m venv .venv
    python=.venv/bin/python
fi
"$python" -m pip install -q --upgrade pip >/dev/null
"$python" -m pip install -q -e ".[test]"

"$python" -m ruff check josefk tests bench
"$python" -m mypy
exec "$python" -m pytest "$@"
