#!/usr/bin/env bash
# Build the josefk image (and the compose cluster's etcd image) with no image registry and no
# network inside the build: local Debian base images (scripts/build-base-image.sh), and a
# wheelhouse of josefk's dependencies fetched on this host with pip as it is set up here.
#
#   scripts/build-image.sh                 josefk:local, josefk-etcd:local, josefk-prometheus:local
#   JOSEFK_IMAGE=josefk:dev scripts/build-image.sh
#
# With a registry at hand none of this is needed: `docker build -t josefk .` uses the
# official Python images, and `docker compose up` builds what it lacks.
set -euo pipefail
cd "$(dirname "$0")/.."

image=${JOSEFK_IMAGE:-josefk:local}
etcd_image=${JOSEFK_ETCD_IMAGE:-josefk-etcd:local}
prometheus_image=${JOSEFK_PROMETHEUS_IMAGE:-josefk-prometheus:local}
python=${PYTHON:-python3}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && python=.venv/bin/python

./scripts/build-base-image.sh
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
base="josefk-base:$suite"
build_base="josefk-base-build:$suite"

# The wheels must suit the base image's Python, not only this host's.
base_python=$(docker run --rm --entrypoint python3 "$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
wheelhouse=deploy/wheelhouse
echo "wheelhouse for Python $base_python: josefk's dependencies and build backend"
deps=$("$python" - <<'EOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)
print("\n".join(project["project"]["dependencies"] + project["build-system"]["requires"]))
EOF
)
mapfile -t requirements <<<"$deps"
"$python" -m pip download --quiet --dest "$wheelhouse" --only-binary=:all: \
    --python-version "$base_python" --implementation cp --platform manylinux2014_x86_64 \
    --platform "manylinux_2_28_x86_64" --platform "manylinux_2_34_x86_64" \
    "${requirements[@]}"

echo "docker build $image"
docker build --quiet \
    --build-arg BASE_IMAGE="$base" --build-arg BUILD_IMAGE="$build_base" \
    -t "$image" . >/dev/null
echo "docker build $etcd_image"
docker build --quiet --build-arg BASE_IMAGE="$build_base" -t "$etcd_image" deploy/etcd >/dev/null
echo "docker build $prometheus_image"
docker build --quiet --build-arg BASE_IMAGE="$build_base" -t "$prometheus_image" deploy/prometheus >/dev/null
echo "built $image ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}')) and $etcd_image"
