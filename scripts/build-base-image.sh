#!/usr/bin/env bash
# Build josefk's local base images from Debian's packages, for machines whose Docker engine
# has no image registry to pull from (this project's own build and test machines).
#
#   scripts/build-base-image.sh          build what is missing (or stale), keep the rest
#   scripts/build-base-image.sh --force  build both again
#
# Makes two images with debootstrap and `docker import`:
#   josefk-base:bookworm        Debian minbase + python3 + python3-venv: the image's final stage
#   josefk-base-build:bookworm  the same + gcc and Python's headers (the C decoder) + etcd-server and etcdctl
#                               + prometheus (the compose cluster's etcd and prometheus images
#                               build on it)
# Packages come from the Debian mirror this machine's apt is configured with (read from its
# apt sources here, never written into the repository). The images carry a label with a hash
# of this script: a changed script builds them again, an unchanged one is reused.
#
# A user with a registry needs none of this: the Dockerfile's defaults are the official
# python images.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

force=0
[ "${1:-}" = "--force" ] && force=1

suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
runtime_image="josefk-base:$suite"
build_image="josefk-base-build:$suite"
recipe=$(sha256sum "$0" | cut -c1-16)

current() {
    [ "$(docker image inspect --format '{{ index .Config.Labels "org.josefk.base.recipe" }}' "$1" 2>/dev/null)" = "$recipe" ]
}

if [ $force = 0 ] && current "$runtime_image" && current "$build_image"; then
    echo "base images $runtime_image and $build_image are up to date"
    exit 0
fi

# The first mirror apt uses for the main archive of this suite (deb822 .sources files or the
# one-line format).
mirror() {
    local uri
    uri=$(awk -v suite="$suite" '
        /^URIs:/ { uris = $2 }
        /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) found = uris }
        /^$/ { uris = "" }
        END { if (found) print found }' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(awk -v suite="$suite" '$1 == "deb" && $0 ~ " " suite " " { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)
    fi
    echo "$uri"
}
mirror_uri=$(mirror)
if [ -z "$mirror_uri" ]; then
    echo "cannot find a Debian mirror for $suite in this machine's apt sources" >&2
    exit 1
fi

command -v debootstrap >/dev/null 2>&1 || {
    echo "installing debootstrap"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}

work=$(mktemp -d /tmp/josefk-base.XXXXXX)
trap 'as_root rm -rf "$work"' EXIT
cache="$work/cache"
mkdir -p "$cache"

# debootstrap into $1 with the packages $2 (comma separated), trim, import as image $3.
make_image() {
    local root="$work/$1" packages=$2 image=$3
    echo "debootstrap $suite ($packages) -> $image"
    as_root debootstrap --variant=minbase --include="$packages" --cache-dir="$cache" \
        "$suite" "$root" "$mirror_uri" >"$work/$1.log" 2>&1 || {
        tail -20 "$work/$1.log" >&2
        exit 1
    }
    # Package lists, caches and docs are of no use in an image; the mirror stays out of it too.
    as_root rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
        "$root"/etc/apt/sources.list "$root"/etc/apt/sources.list.d/*
    as_root tar -C "$root" -c . | docker import \
        --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change "ENV LANG=C.UTF-8" \
        --change "LABEL org.josefk.base.recipe=$recipe" \
        --change 'CMD ["/bin/bash"]' \
        - "$image" >/dev/null
    echo "built $image ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}'))"
}

# The larger one first: the second finds every package it needs in the shared cache.
make_image build python3,python3-venv,python3-dev,gcc,libc6-dev,etcd-server,etcd-client,prometheus "$build_image"
make_image runtime python3,python3-venv "$runtime_image"
