# Sourced by the peer-suite scripts: start_broker NAME PORT [josefk serve arguments...]
# starts a fresh `josefk serve` of this checkout with its data in WORK/data-NAME and its log
# in WORK/NAME-broker.log, stops it when the calling script exits, and returns once PORT
# takes connections. Needs ROOT (the checkout) and WORK set.
start_broker() {
    local name=$1 port=$2
    shift 2
    rm -rf "$WORK/data-$name"
    "$ROOT/.venv/bin/josefk" serve --data-dir "$WORK/data-$name" --metrics-port 0 "$@" \
        > "$WORK/$name-broker.log" 2>&1 &
    BROKER=$!
    trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null || true' EXIT
    for _ in $(seq 1 120); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.5
    done
    echo "the broker did not listen on $port; see $WORK/$name-broker.log" >&2
    return 1
}
