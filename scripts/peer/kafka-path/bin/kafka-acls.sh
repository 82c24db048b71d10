#!/usr/bin/env bash
# A stand-in for Kafka's bin/kafka-acls.sh, for client test suites that call it (librdkafka's
# tests, through KAFKA_PATH): --add, --remove and --list, with the flags `josefk acls` shares
# with kafka-acls.sh (principals, hosts, operations, resources, --force), carried out by the
# josefk CLI of this checkout.
set -euo pipefail
JOSEFK=${JOSEFK:-$(cd "$(dirname "$0")/../../../.." && pwd)/.venv/bin/josefk}
verb="" options=()
while [ $# -gt 0 ]; do
    case "$1" in
        --add) verb=add; shift ;;
        --remove) verb=delete; shift ;;
        --list) verb=list; shift ;;
        *) options+=("$1"); shift ;;
    esac
done
if [ -z "$verb" ]; then
    echo "kafka-acls.sh (josefk stand-in): name --add, --remove or --list" >&2
    exit 2
fi
exec "$JOSEFK" acls "$verb" "${options[@]}"
