#!/usr/bin/env python3
"""Write josefk's Grafana dashboards to deploy/grafana/*.json.

The dashboards are declared here, panel by panel, and written as plain Grafana JSON that
imports into any Grafana (Dashboards > New > Import): each has a ``datasource`` variable
for the Prometheus that scrapes the brokers, so nothing in them names a data source uid.
tests/metrics/test_dashboards.py checks that the files are what this script writes, and
tests/integration/test_dashboards_prometheus.py that every query returns data from a real
Prometheus scraping real brokers.

    .venv/bin/python scripts/make-dashboards.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "deploy" / "grafana"
RATE = "$__rate_interval"
INST = 'instance=~"$instance"'
T = 'topic=~"$topic"'
G = 'consumergroup=~"$group"'
R = 'request=~"$request"'

# (title, kind, unit, [(expr, legend)]); kind "stat" or "timeseries".
Panel = tuple[str, str, str, list[tuple[str, str]]]


def variable(name: str, label: str, query: str, *, multi: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": f"{name}-values"},
        "definition": query,
        "refresh": 2,
        "includeAll": multi,
        "multi": multi,
        "allValue": ".*",
        "current": {"selected": True, "text": "All", "value": "$__all"},
        "sort": 1,
    }


DATASOURCE = {
    "name": "datasource",
    "label": "Prometheus",
    "type": "datasource",
    "query": "prometheus",
    "current": {},
    "refresh": 1,
}
INSTANCE = variable("instance", "Broker", "label_values(josefk_broker_info, instance)")
TOPIC = variable("topic", "Topic", "label_values(kafka_log_log_size, topic)")
GROUP = variable(
    "group", "Consumer group", "label_values(kafka_consumergroup_members, consumergroup)"
)
REQUEST = variable(
    "request", "Request", "label_values(kafka_network_requestmetrics_requests_total, request)"
)

DASHBOARDS: dict[str, tuple[str, str, list[dict[str, Any]], list[Panel]]] = {
    "josefk-cluster-overview": (
        "josefk / Cluster overview",
        "Controller, partition health, throughput, connections and the brokers' load.",
        [DATASOURCE, INSTANCE],
        [
            (
                "Active controllers",
                "stat",
                "none",
                [("sum(kafka_controller_kafkacontroller_activecontrollercount)", "controllers")],
            ),
            ("Brokers up", "stat", "none", [('sum(up{job=~"josefk.*"})', "up")]),
            (
                "Offline partitions",
                "stat",
                "none",
                [("sum(kafka_controller_kafkacontroller_offlinepartitionscount)", "offline")],
            ),
            (
                "Under-replicated partitions",
                "stat",
                "none",
                [(f"sum(kafka_server_replicamanager_underreplicatedpartitions{{{INST}}})", "urp")],
            ),
            (
                "Under min ISR partitions",
                "stat",
                "none",
                [
                    (
                        f"sum(kafka_server_replicamanager_underminisrpartitioncount{{{INST}}})",
                        "under min isr",
                    )
                ],
            ),
            (
                "Offline log dirs",
                "stat",
                "none",
                [(f"sum(kafka_log_logmanager_offlinelogdirectorycount{{{INST}}})", "offline dirs")],
            ),
            (
                "Messages in",
                "timeseries",
                "short",
                [
                    (
                        f"sum by (instance) (rate(kafka_server_brokertopicmetrics_messagesin_total{{{INST}}}[{RATE}]))",
                        "{{instance}}",
                    )
                ],
            ),
            (
                "Bytes in / out",
                "timeseries",
                "Bps",
                [
                    (
                        f"sum by (instance) (rate(kafka_server_brokertopicmetrics_bytesin_total{{{INST}}}[{RATE}]))",
                        "in {{instance}}",
                    ),
                    (
                        f"sum by (instance) (rate(kafka_server_brokertopicmetrics_bytesout_total{{{INST}}}[{RATE}]))",
                        "out {{instance}}",
                    ),
                ],
            ),
            (
                "Partitions and leaders",
                "timeseries",
                "none",
                [
                    (
                        f"kafka_server_replicamanager_partitioncount{{{INST}}}",
                        "partitions {{instance}}",
                    ),
                    (f"kafka_server_replicamanager_leadercount{{{INST}}}", "leaders {{instance}}"),
                ],
            ),
            (
                "Connections",
                "timeseries",
                "none",
                [
                    (
                        f"sum by (instance, listener) (kafka_server_socketservermetrics_connection_count{{{INST}}})",
                        "{{instance}} {{listener}}",
                    )
                ],
            ),
            (
                "Idle share of the event loop (network / request handler idle)",
                "timeseries",
                "percentunit",
                [
                    (
                        f"kafka_network_socketserver_networkprocessoravgidlepercent{{{INST}}}",
                        "network {{instance}}",
                    ),
                    (
                        f"kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent{{{INST}}}",
                        "handlers {{instance}}",
                    ),
                ],
            ),
            (
                "CPU and resident memory",
                "timeseries",
                "short",
                [
                    (
                        f'rate(process_cpu_seconds_total{{job=~"josefk.*",{INST}}}[{RATE}])',
                        "cpu s/s {{instance}}",
                    ),
                    (
                        f'process_resident_memory_bytes{{job=~"josefk.*",{INST}}} / 2^20',
                        "RSS MiB {{instance}}",
                    ),
                ],
            ),
        ],
    ),
    "josefk-topics": (
        "josefk / Topics",
        "Per topic: traffic, failures, log size and the partitions' offsets.",
        [DATASOURCE, INSTANCE, TOPIC],
        [
            (
                "Messages in by topic",
                "timeseries",
                "short",
                [
                    (
                        f"sum by (topic) (rate(kafka_server_brokertopicmetrics_messagesin_total{{{INST},{T}}}[{RATE}]))",
                        "{{topic}}",
                    )
                ],
            ),
            (
                "Bytes in by topic",
                "timeseries",
                "Bps",
                [
                    (
                        f"sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesin_total{{{INST},{T}}}[{RATE}]))",
                        "{{topic}}",
                    )
                ],
            ),
            (
                "Bytes out by topic",
                "timeseries",
                "Bps",
                [
                    (
                        f"sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesout_total{{{INST},{T}}}[{RATE}]))",
                        "{{topic}}",
                    )
                ],
            ),
            (
                "Failed produce / fetch requests",
                "timeseries",
                "short",
                [
                    (
                        f"sum by (topic) (rate(kafka_server_brokertopicmetrics_failedproducerequests_total{{{INST},{T}}}[{RATE}]))",
                        "produce {{topic}}",
                    ),
                    (
                        f"sum by (topic) (rate(kafka_server_brokertopicmetrics_failedfetchrequests_total{{{INST},{T}}}[{RATE}]))",
                        "fetch {{topic}}",
                    ),
                ],
            ),
            (
                "Bytes rejected",
                "timeseries",
                "Bps",
                [
                    (
                        f"sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesrejected_total{{{INST},{T}}}[{RATE}]))",
                        "{{topic}}",
                    )
                ],
            ),
            (
                "Log size by topic (all replicas)",
                "timeseries",
                "bytes",
                [(f"sum by (topic) (kafka_log_log_size{{{INST},{T}}})", "{{topic}}")],
            ),
            (
                "Segments by topic",
                "timeseries",
                "none",
                [(f"sum by (topic) (kafka_log_log_numlogsegments{{{INST},{T}}})", "{{topic}}")],
            ),
            (
                "Partition end offsets (high watermark)",
                "timeseries",
                "none",
                [(f"kafka_topic_partition_current_offset{{{T}}}", "{{topic}}-{{partition}}")],
            ),
            (
                "Partition start offsets",
                "timeseries",
                "none",
                [(f"kafka_topic_partition_oldest_offset{{{T}}}", "{{topic}}-{{partition}}")],
            ),
        ],
    ),
    "josefk-consumer-groups": (
        "josefk / Consumer groups and lag",
        "Lag under kafka_exporter's names, consumption rate, members, states and rebalances.",
        [DATASOURCE, GROUP, TOPIC],
        [
            (
                "Lag by group and topic",
                "timeseries",
                "none",
                [
                    (
                        f"sum by (consumergroup, topic) (kafka_consumergroup_lag_sum{{{G},{T}}})",
                        "{{consumergroup}} {{topic}}",
                    )
                ],
            ),
            (
                "Lag by partition",
                "timeseries",
                "none",
                [
                    (
                        f"kafka_consumergroup_lag{{{G},{T}}}",
                        "{{consumergroup}} {{topic}}-{{partition}}",
                    )
                ],
            ),
            (
                "Consumption rate (committed offsets)",
                "timeseries",
                "short",
                [
                    (
                        f"sum by (consumergroup, topic) (rate(kafka_consumergroup_current_offset_sum{{{G},{T}}}[{RATE}]))",
                        "{{consumergroup}} {{topic}}",
                    )
                ],
            ),
            (
                "Committed offsets",
                "timeseries",
                "none",
                [
                    (
                        f"kafka_consumergroup_current_offset{{{G},{T}}}",
                        "{{consumergroup}} {{topic}}-{{partition}}",
                    )
                ],
            ),
            (
                "Members",
                "timeseries",
                "none",
                [(f"kafka_consumergroup_members{{{G}}}", "{{consumergroup}}")],
            ),
            (
                "Groups by state",
                "timeseries",
                "none",
                [
                    (
                        "sum by (state) (kafka_coordinator_group_groupmetadatamanager_numgroups)",
                        "{{state}}",
                    )
                ],
            ),
            (
                "Rebalances (generation changes; counted on any coordinator)",
                "timeseries",
                "none",
                [
                    (
                        f'sum by (group) (changes(kafka_coordinator_group_group_generation{{group=~"$group"}}[{RATE}]))',
                        "{{group}}",
                    )
                ],
            ),
            (
                "Offset commits",
                "timeseries",
                "short",
                [
                    (
                        f'sum by (group) (rate(kafka_coordinator_group_groupmetadatamanager_offsetcommits_total{{group=~"$group"}}[{RATE}]))',
                        "{{group}}",
                    )
                ],
            ),
        ],
    ),
    "josefk-replication": (
        "josefk / Replication",
        "ISR health, follower lag, leader elections and leadership balance.",
        [DATASOURCE, INSTANCE, TOPIC],
        [
            (
                "Under-replicated partitions",
                "timeseries",
                "none",
                [
                    (
                        f"kafka_server_replicamanager_underreplicatedpartitions{{{INST}}}",
                        "{{instance}}",
                    )
                ],
            ),
            (
                "ISR shrinks / expands",
                "timeseries",
                "short",
                [
                    (
                        f"sum by (instance) (rate(kafka_server_replicamanager_isrshrinks_total{{{INST}}}[{RATE}]))",
                        "shrinks {{instance}}",
                    ),
                    (
                        f"sum by (instance) (rate(kafka_server_replicamanager_isrexpands_total{{{INST}}}[{RATE}]))",
                        "expands {{instance}}",
                    ),
                ],
            ),
            (
                "Replica fetcher max lag",
                "timeseries",
                "none",
                [
                    (
                        f'kafka_server_replicafetchermanager_maxlag{{clientId="Replica",{INST}}}',
                        "{{instance}}",
                    )
                ],
            ),
            (
                "Follower lag by partition (follower side)",
                "timeseries",
                "none",
                [
                    (
                        f"max by (topic, partition) (kafka_server_fetcherlagmetrics_consumerlag{{{INST},{T}}})",
                        "{{topic}}-{{partition}}",
                    )
                ],
            ),
            (
                "Follower lag by partition (leader side)",
                "timeseries",
                "none",
                [
                    (
                        f"max by (topic, partition, follower) (josefk_replica_follower_lag_messages{{{INST},{T}}})",
                        "{{topic}}-{{partition}} on {{follower}}",
                    )
                ],
            ),
            (
                "Leader elections",
                "timeseries",
                "short",
                [
                    (
                        f"sum(rate(kafka_controller_controllerstats_leaderelectionrateandtimems_count[{RATE}]))",
                        "elections/s",
                    )
                ],
            ),
            (
                "Leader election time",
                "timeseries",
                "ms",
                [
                    (
                        'max(kafka_controller_controllerstats_leaderelectionrateandtimems{quantile="0.99"})',
                        "p99",
                    ),
                    (
                        'max(kafka_controller_controllerstats_leaderelectionrateandtimems{quantile="0.50"})',
                        "p50",
                    ),
                ],
            ),
            (
                "Unclean leader elections",
                "stat",
                "none",
                [("sum(kafka_controller_controllerstats_uncleanleaderelections_total)", "unclean")],
            ),
            (
                "Leaders per broker",
                "timeseries",
                "none",
                [(f"kafka_server_replicamanager_leadercount{{{INST}}}", "{{instance}}")],
            ),
        ],
    ),
    "josefk-requests": (
        "josefk / Requests and latency",
        "Request rates, TotalTimeMs quantiles, errors, queue and purgatories.",
        [DATASOURCE, INSTANCE, REQUEST],
        [
            (
                "Requests by API",
                "timeseries",
                "reqps",
                [
                    (
                        f"sum by (request) (rate(kafka_network_requestmetrics_requests_total{{{INST},{R}}}[{RATE}]))",
                        "{{request}}",
                    )
                ],
            ),
            (
                "Total time p99 (TotalTimeMs)",
                "timeseries",
                "ms",
                [
                    (
                        f'max by (request) (kafka_network_requestmetrics_totaltimems{{quantile="0.99",{INST},{R}}})',
                        "{{request}}",
                    )
                ],
            ),
            (
                "Total time p50 (TotalTimeMs)",
                "timeseries",
                "ms",
                [
                    (
                        f'max by (request) (kafka_network_requestmetrics_totaltimems{{quantile="0.50",{INST},{R}}})',
                        "{{request}}",
                    )
                ],
            ),
            (
                "Total time p99 (histogram)",
                "timeseries",
                "s",
                [
                    (
                        f"histogram_quantile(0.99, sum by (le, request) (rate(kafka_network_requestmetrics_totaltime_seconds_bucket{{{INST},{R}}}[{RATE}])))",
                        "{{request}}",
                    )
                ],
            ),
            (
                "Errors by API and code",
                "timeseries",
                "short",
                [
                    (
                        f"sum by (request, error) (rate(kafka_network_requestmetrics_errors_total{{{INST},{R}}}[{RATE}]))",
                        "{{request}} {{error}}",
                    )
                ],
            ),
            (
                "Request bytes",
                "timeseries",
                "Bps",
                [
                    (
                        f"sum by (request) (rate(kafka_network_requestmetrics_requestbytes_total{{{INST},{R}}}[{RATE}]))",
                        "{{request}}",
                    )
                ],
            ),
            (
                "Request queue size",
                "timeseries",
                "none",
                [
                    (
                        f"kafka_network_requestchannel_requestqueuesize{{{INST}}}",
                        "queued {{instance}}",
                    ),
                    (f"josefk_network_requests_in_progress{{{INST}}}", "in progress {{instance}}"),
                ],
            ),
            (
                "Purgatory size",
                "timeseries",
                "none",
                [
                    (
                        f"sum by (delayed_operation) (kafka_server_delayedoperationpurgatory_purgatorysize{{{INST}}})",
                        "{{delayed_operation}}",
                    )
                ],
            ),
        ],
    ),
}


def panel(index: int, spec: Panel, x: int, y: int) -> dict[str, Any]:
    title, kind, unit, targets = spec
    width, height = size(kind)
    return {
        "id": index + 1,
        "type": kind,
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": height, "w": width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}}
        if kind == "timeseries"
        else {"reduceOptions": {"calcs": ["lastNotNull"]}},
        "targets": [
            {
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "expr": expr,
                "legendFormat": legend,
                "refId": chr(ord("A") + n),
            }
            for n, (expr, legend) in enumerate(targets)
        ],
    }


def size(kind: str) -> tuple[int, int]:
    return (6, 4) if kind == "stat" else (12, 8)


def layout(panels: list[Panel]) -> list[dict[str, Any]]:
    """Left to right on Grafana's 24-column grid, a new row when the next panel won't fit."""
    placed, x, y, row_height = [], 0, 0, 0
    for index, spec in enumerate(panels):
        width, height = size(spec[1])
        if x + width > 24:
            x, y, row_height = 0, y + row_height, 0
        placed.append(panel(index, spec, x, y))
        x += width
        row_height = max(row_height, height)
    return placed


def dashboard(uid: str) -> dict[str, Any]:
    title, description, variables, panels = DASHBOARDS[uid]
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["josefk", "kafka"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "browser",
        "templating": {"list": variables},
        "annotations": {"list": []},
        "links": [
            {"type": "dashboards", "tags": ["josefk"], "asDropdown": True, "title": "josefk"}
        ],
        "panels": layout(panels),
    }


def render(uid: str) -> str:
    return json.dumps(dashboard(uid), indent=2) + "\n"


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for uid in DASHBOARDS:
        (OUT / f"{uid}.json").write_text(render(uid))
        print(OUT / f"{uid}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
