#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine, then run the whole suite.
#   ./scripts/test.sh            all tests
#   ./scripts/test.sh -k index   any pytest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian packages the tests need, installed only where missing: kcat (a real Kafka client the
# integration tests drive), etcd-server (the cluster tests start real etcd processes), a C
# compiler and Python headers (josefk's optional C decoder, whose tests must not skip), a
# Java runtime (PySpark's local mode), iproute2 (network namespaces for the partition test),
# openssl (test certificates), prometheus (the dashboards' test), chromium with its driver (the
# web console's browser tests), Go with sarama's sources (a Go client's tests) and debootstrap
# (the container tests' base image).
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
# prometheus: the dashboard test runs a real Prometheus against real brokers.
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
python_headers=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$python_headers/Python.h" ] || missing+=(python3-dev)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
# iproute2 (ip netns, veth): the network-partition test puts each broker in a namespace.
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# openssl: the TLS tests and the security benchmark make their CA and certificates with it,
# as the README tells users to.
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# golang-go and sarama's sources: tests/integration/test_sarama.py builds a Go client program
# in GOPATH mode from Debian's packaged sources (nothing is downloaded).
command -v go >/dev/null 2>&1 || missing+=(golang-go)
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || missing+=(golang-github-shopify-sarama-dev)
# chromium and chromium-driver: the web console's tests drive a real headless browser.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
# debootstrap, where a Docker engine is present: tests/docker build the image on a local
# Debian base (scripts/build-base-image.sh), since no image can be pulled on these machines.
if command -v docker >/dev/null 2>&1; then
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
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
"$python" -m ruff format --check josefk tests bench examples scripts
"$python" -m mypy
exec "$python" -m pytest "$@"
