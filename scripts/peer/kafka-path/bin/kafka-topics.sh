#!/usr/bin/env bash
# A stand-in for Kafka's bin/kafka-topics.sh, for client test suites that call it (librdkafka's
# tests, through KAFKA_PATH): --create (with --partitions, --replication-factor, --config),
# --alter --partitions and --delete of one --topic, carried out by the josefk CLI of this
# checkout. Anything else is refused with exit code 2, so a suite that needs more says so.
set -euo pipefail
JOSEFK=${JOSEFK:-$(cd "$(dirname "$0")/../../../.." && pwd)/.venv/bin/josefk}
action="" topic="" options=()
while [ $# -gt 0 ]; do
    case "$1" in
        --create | --alter | --delete) action=${1#--}; shift ;;
        --topic) topic=$2; shift 2 ;;
        --bootstrap-server) options+=(--bootstrap-server "$2"); shift 2 ;;
        --partitions | --replication-factor | --config) options+=("$1" "$2"); shift 2 ;;
        *) echo "kafka-topics.sh (josefk stand-in): $1 is not supported" >&2; exit 2 ;;
    esac
done
if [ -z "$action" ] || [ -z "$topic" ]; then
    echo "kafka-topics.sh (josefk stand-in): name --create, --alter or --delete, and --topic" >&2
    exit 2
fi
exec "$JOSEFK" topics "$action" "$topic" "${options[@]}"
