# josefk: a Kafka-compatible broker. `docker build -t josefk .` builds on the official Python
# images; machines without an image registry pass local bases (scripts/build-image.sh does):
#   docker build --build-arg BASE_IMAGE=josefk-base:bookworm \
#                --build-arg BUILD_IMAGE=josefk-base-build:bookworm -t josefk .
ARG BASE_IMAGE=python:3.11-slim
ARG BUILD_IMAGE=python:3.11

# --- build: the josefk wheel (with its C decoder) and the wheels of its dependencies --------
FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY deploy/wheelhouse/ /wheelhouse/
COPY pyproject.toml setup.py README.md ./
COPY josefk ./josefk
# With wheels in deploy/wheelhouse nothing is fetched: the build needs no network.
RUN set -eu; \
    index=""; \
    if ls /wheelhouse/*.whl >/dev/null 2>&1; then index="--no-index --find-links /wheelhouse"; fi; \
    python3 -m venv /tmp/pip; \
    /tmp/pip/bin/pip wheel --quiet --no-cache-dir $index --wheel-dir /wheels . ; \
    python3 -m zipfile -l /wheels/josefk-*.whl | grep -q _cdecode \
        || { echo "the C decoder was not built" >&2; exit 1; }

# --- the image: Python, josefk in a venv, no compiler, no caches ------------------------------
FROM ${BASE_IMAGE}
ARG JOSEFK_VERSION=0.1.0
LABEL org.opencontainers.image.title="josefk" \
      org.opencontainers.image.description="A Kafka-compatible broker in Python that stores partitions in Kafka's own log format" \
      org.opencontainers.image.version="${JOSEFK_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.documentation="README.md in the josefk repository"
COPY --from=build /wheels /tmp/wheels
RUN set -eu; \
    python3 -m venv /opt/josefk; \
    /opt/josefk/bin/pip install --quiet --no-cache-dir --no-index --find-links /tmp/wheels josefk; \
    /opt/josefk/bin/pip uninstall --quiet --yes pip setuptools; \
    rm -rf /tmp/wheels; \
    groupadd --system --gid 1000 josefk; \
    useradd --system --uid 1000 --gid josefk --home-dir /var/lib/josefk --shell /usr/sbin/nologin josefk; \
    mkdir -p /var/lib/josefk; \
    chown josefk:josefk /var/lib/josefk

# Every broker property can be set as JOSEFK_<KEY> (dots as underscores); these are the
# container's defaults. Clients on the host reach the broker as localhost:9092 with
# `-p 9092:9092`; see README.md ("Containers") for internal and external listeners.
ENV PATH=/opt/josefk/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    JOSEFK_LOG_DIRS=/var/lib/josefk \
    JOSEFK_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    JOSEFK_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    JOSEFK_METRICS_HOST=0.0.0.0 \
    JOSEFK_METRICS_PORT=9404 \
    JOSEFK_SHUTDOWN_TIMEOUT_MS=8000
VOLUME /var/lib/josefk
EXPOSE 9092 9404
USER josefk
WORKDIR /var/lib/josefk
HEALTHCHECK --interval=5s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "-m", "josefk.healthcheck"]
# Exec form: josefk is PID 1 and gets docker stop's SIGTERM itself, and finishes its clean
# shutdown within the 8 s above, inside docker stop's 10 s grace period.
ENTRYPOINT ["josefk", "serve"]
