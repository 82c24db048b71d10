#!/usr/bin/env bash
# Run librdkafka's own test suite (its tests/ directory) against a josefk broker of this
# checkout.
#
#   scripts/peer/librdkafka.sh LIBRDKAFKA_DIR [classic|consumer] [TEST NUMBERS...]
#
# LIBRDKAFKA_DIR: a git checkout of confluentinc/librdkafka, obtained however your machine
# gets sources; it is built here with gcc against Debian's libraries (installed with apt-get
# when missing), once. classic|consumer: the consumer group protocol the tests use (consumer:
# KIP-848). Test numbers (e.g. 0001 0170): default every test that needs a broker (not the
# local/mock ones, not the manual ones); the share-group tests are 0170-0190.
#
# A fresh broker runs on PORT (default 19292), its data under WORK (default
# /tmp/josefk-peer), with group.share.min.record.lock.duration.ms=1000 (test 0173 asks for a
# 3 s lock), num.partitions=4 and an authorizer that allows what no ACL names (0081 creates
# and deletes ACLs, as against Kafka's test clusters); stopped afterwards. Each test number runs in its own
# test-runner (-L: no local tests, -K: no known-issue tests), timeouts doubled (MULT=2: two
# cores), at most PER_TEST_TIMEOUT seconds. One line per test number on stdout and in
# WORK/librdkafka-<protocol>/summary.txt, each test's log beside it. docs/compatibility.md
# holds the latest results.
#
# SECURITY=SASL_PLAINTEXT runs the suite over a SASL_PLAINTEXT listener (PORT+1; the
# PLAINTEXT one stays for creating the user) as a SCRAM-SHA-512 user, with
# connections.max.reauth.ms=REAUTH_MS (default 10000), so that the SASL tests (0135
# credentials, 0142 re-authentication) run instead of skipping (0093 needs REAUTH_MS above
# the 20 s it parks a JoinGroup: librdkafka holds re-authentication behind it); results in
# WORK/librdkafka-<protocol>-sasl.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RDK=$(cd "${1:?LIBRDKAFKA_DIR}" && pwd)
PROTO=${2:-classic}
shift $(( $# < 2 ? $# : 2 ))
LIST="$*"
WORK=${WORK:-/tmp/josefk-peer}
# shellcheck source=broker.sh
. "$ROOT/scripts/peer/broker.sh"
PORT=${PORT:-19292}
MULT=${MULT:-2}
PER_TEST_TIMEOUT=${PER_TEST_TIMEOUT:-900}
SECURITY=${SECURITY:-PLAINTEXT}
REAUTH_MS=${REAUTH_MS:-10000}
case "$SECURITY" in
    PLAINTEXT) OUT="$WORK/librdkafka-$PROTO" ;;
    SASL_PLAINTEXT) OUT="$WORK/librdkafka-$PROTO-sasl" ;;
    *) echo "SECURITY must be PLAINTEXT or SASL_PLAINTEXT, not $SECURITY" >&2; exit 2 ;;
esac
mkdir -p "$OUT"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# The suite creates many topics with replication factor 3 (its CI runs three brokers); with
# one broker CreateTopics rightly refuses them. Its topic creation is patched once to cap
# the factor at TEST_MAX_REPLICATION_FACTOR when that is set (it is below, to 1); the patch
# is marked and shows in `git diff` of the checkout.
if ! grep -q "josefk scripts/peer" "$RDK/tests/test.c"; then
    python3 - "$RDK/tests/test.c" <<'PY'
import sys
path = sys.argv[1]
source = open(path).read()
anchor = "        newt[0] =\n            rd_kafka_NewTopic_new(topicname, partition_cnt, replication_factor,"
assert source.count(anchor) == 1, "test.c changed: the replication factor patch needs a new anchor"
cap = (
    "        /* josefk scripts/peer: at most the test cluster's brokers. */\n"
    "        if (test_getenv(\"TEST_MAX_REPLICATION_FACTOR\", NULL) &&\n"
    "            replication_factor >\n"
    "                atoi(test_getenv(\"TEST_MAX_REPLICATION_FACTOR\", NULL)))\n"
    "                replication_factor =\n"
    "                    atoi(test_getenv(\"TEST_MAX_REPLICATION_FACTOR\", NULL));\n"
)
open(path, "w").write(source.replace(anchor, cap + anchor))
PY
fi

if [ ! -x "$RDK/tests/test-runner" ]; then
    as_root apt-get update -qq
    as_root apt-get install -y -qq libssl-dev libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev \
        sqlite3 g++ make pkg-config python3 > /dev/null
    (cd "$RDK" && ./configure > "$WORK/librdkafka-configure.log" && make -j2 libs \
        > "$WORK/librdkafka-make.log" 2>&1)
fi
# Builds the test-runner, or rebuilds it when test.c was just patched.
make -C "$RDK/tests" build > "$WORK/librdkafka-tests-make.log" 2>&1

if [ -z "$LIST" ]; then
    # Every test of test.c's table that needs a broker.
    LIST=$(python3 - "$RDK/tests/test.c" <<'PY'
import re, sys
source = open(sys.argv[1]).read()
table = source[source.index("struct test tests[]"):]
table = table[: table.index("{NULL}")]
numbers = []
for match in re.finditer(r"_TEST\((\w+),\s*([^,)]+)", table):
    name, flags = match.groups()
    if "TEST_F_LOCAL" in flags or "TEST_F_MANUAL" in flags or name.startswith(("0000", "8")):
        continue
    number = name.split("_")[0]
    if number not in numbers:
        numbers.append(number)
print(" ".join(numbers))
PY
)
fi

SUITE_PORT=$PORT
listeners="PLAINTEXT://127.0.0.1:$PORT"
reauth_ms=0
if [ "$SECURITY" = SASL_PLAINTEXT ]; then
    SUITE_PORT=$((PORT + 1))
    listeners="$listeners,SASL_PLAINTEXT://127.0.0.1:$SUITE_PORT"
    reauth_ms=$REAUTH_MS
fi
start_broker librdkafka "$PORT" --set "listeners=$listeners" --set num.partitions=4 \
    --set group.share.min.record.lock.duration.ms=1000 \
    --set authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
    --set allow.everyone.if.no.acl.found=true --set "connections.max.reauth.ms=$reauth_ms"

cat > "$OUT/test.conf" <<EOF
bootstrap.servers=127.0.0.1:$SUITE_PORT
test.timeout.multiplier=$MULT
EOF
if [ "$SECURITY" = SASL_PLAINTEXT ]; then
    "$ROOT/.venv/bin/josefk" users add librdkafka --mechanism SCRAM-SHA-512 \
        --password librdkafka-secret --bootstrap "127.0.0.1:$PORT" > /dev/null
    cat >> "$OUT/test.conf" <<EOF
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.username=librdkafka
sasl.password=librdkafka-secret
EOF
fi
cd "$RDK/tests"
export LD_LIBRARY_PATH=../src:../src-cpp RDKAFKA_TEST_CONF="$OUT/test.conf" \
    TEST_KAFKA_VERSION=4.2.0 TEST_MODE=bare TEST_MAX_REPLICATION_FACTOR=1
# Tests that call Kafka's shell tools (0045's subtests, 0052, 0077, 0109, 0115, 0119) get the
# stand-ins over the josefk CLI, on the PLAINTEXT listener, unless KAFKA_PATH names a Kafka.
export KAFKA_PATH=${KAFKA_PATH:-$ROOT/scripts/peer/kafka-path} BROKERS=${BROKERS:-127.0.0.1:$PORT}
if [ "$PROTO" = consumer ]; then
    export TEST_CONSUMER_GROUP_PROTOCOL=consumer
else
    unset TEST_CONSUMER_GROUP_PROTOCOL
fi

echo "librdkafka $(git -C "$RDK" describe --tags --always), $PROTO groups, $SECURITY" |
    tee "$OUT/summary.txt"
for number in $LIST; do
    started=$(date +%s)
    set +e
    TESTS=$number timeout -k 30 "$PER_TEST_TIMEOUT" ./test-runner -L -K -p1 > "$OUT/$number.log" 2>&1
    rc=$?
    set -e
    # The runner's summary rows: "| 0001_multiobj | PASSED | 1.234s | ...".
    results=$(sed 's/\x1b\[[0-9;]*m//g' "$OUT/$number.log" |
        grep -E "^\| ${number}_[A-Za-z0-9_]+ +\| +(PASSED|FAILED|SKIPPED)" |
        awk -F'|' '{gsub(/ /, "", $2); gsub(/ /, "", $3); printf "%s=%s ", $2, $3}' || true)
    [ $rc -eq 124 ] && results="$results(timed out)"
    printf '%-5s rc=%-3s %5ss  %s\n' "$number" "$rc" "$(( $(date +%s) - started ))" "$results" |
        tee -a "$OUT/summary.txt"
done
