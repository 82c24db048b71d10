"""Probes that own the prometheus-client metric objects, and the HTTP exporter.

Callers use meaningful methods (``produced``, ``request_completed``); nothing else in josefk
touches prometheus_client. Must not import josefk.storage or josefk.broker.

Naming scheme
-------------
Names are Kafka's JMX names flattened the way the Prometheus JMX exporter's common rules do::

    kafka.<domain>:type=<Type>,name=<Name>,<tag>=<v>
        -> kafka_<domain>_<type>_<name>{<tag>="<v>"}

everything lower case, dots and dashes as underscores, ``PerSec`` dropped. Kafka's meters
become counters with ``_total``; its time histograms become Prometheus histograms in seconds
(``_seconds``); gauges keep the plain name. Tags become snake_case labels (``topic``,
``partition``, ``request``, ``error``, ``listener``, ``delayed_operation``, ``group``,
``log_directory``). Metrics Kafka does not have follow the same pattern under the domain
where they belong and say so in their help text (``kafka_log_log_highwatermark``,
``kafka_coordinator_group_group_lag``); what has no Kafka counterpart at all is named
``josefk_...``.

Kafka's timers (``TotalTimeMs``, ``LeaderElectionRateAndTimeMs``) are exported as the JMX
exporter's Kafka rules name them: ``name{quantile="0.99"}`` in milliseconds and
``name_count``, here one Prometheus summary (with a ``_sum`` the rules lack). Consumer lag
and partition offsets are also exported under kafka_exporter's names
(``kafka_consumergroup_lag``, ``kafka_topic_partition_current_offset``, ...), so that the
dashboards and alerts written for either work unchanged. docs/metrics.md lists every series.

===============================================================  ===========================
series                                                           fed by
===============================================================  ===========================
kafka_network_requestmetrics_requests_total{request,version}     RequestProbe
kafka_network_requestmetrics_requestbytes_total{request}         RequestProbe
kafka_network_requestmetrics_errors_total{request,error}         RequestProbe
kafka_network_requestmetrics_totaltime_seconds{request}          RequestProbe (histogram)
kafka_network_requestmetrics_totaltimems{request,quantile}       RequestProbe (summary, ms)
kafka_network_requestchannel_requestqueuesize                    NetworkCollector
kafka_network_socketserver_networkprocessoravgidlepercent        EventLoopCollector
kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent
                                                                 EventLoopCollector
kafka_server_brokertopicmetrics_messagesin_total{topic}          TopicProbe
kafka_server_brokertopicmetrics_bytesin_total{topic}             TopicProbe
kafka_server_brokertopicmetrics_bytesout_total{topic}            TopicProbe
kafka_server_brokertopicmetrics_bytesrejected_total{topic}       TopicProbe
kafka_server_brokertopicmetrics_{total,failed}{produce,fetch}requests_total{topic}
kafka_server_socketservermetrics_connection_count{listener}      SocketServerProbe
kafka_server_socketservermetrics_connection_{creation,close}_total{listener}
kafka_log_logmanager_offlinelogdirectorycount                    LogDirProbe
kafka_log_logmanager_logdirectoryoffline{log_directory}          LogDirProbe
kafka_log_log_{size,numlogsegments,logstartoffset,logendoffset,highwatermark}{topic,partition}
                                                                 PartitionLogCollector
kafka_server_replicamanager_{partitioncount,leadercount}         PartitionLogCollector
kafka_server_replicamanager_{underreplicatedpartitions,underminisrpartitioncount}
                                                                 PartitionLogCollector
josefk_replica_follower_lag_messages{topic,partition,follower}   PartitionLogCollector
kafka_server_fetcherlagmetrics_consumerlag{clientId,topic,partition}
                                                                 PartitionLogCollector
kafka_server_replicafetchermanager_maxlag{clientId}              PartitionLogCollector
kafka_topic_partition_{current_offset,oldest_offset,...}         PartitionLogCollector
kafka_server_replicamanager_{isrshrinks,isrexpands}_total        ReplicationProbe
kafka_controller_kafkacontroller_{activecontrollercount,offlinepartitionscount}
                                                                 ReplicationProbe
kafka_server_delayedoperationpurgatory_{purgatorysize,numdelayedoperations}{delayed_operation}
                                                                 PurgatoryCollector
kafka_coordinator_group_groupmetadatamanager_numgroups{state}    GroupCollector
kafka_coordinator_group_group_{members,generation}{group}        GroupCollector
kafka_coordinator_group_group_state{group,state}                 GroupCollector
kafka_coordinator_group_group_{committedoffset,lag}{group,topic,partition}
                                                                 GroupCollector
kafka_controller_controllerstats_leaderelectionrateandtimems{quantile}
                                                                 ReplicationProbe (summary, ms)
kafka_controller_controllerstats_uncleanleaderelections_total    ReplicationProbe
kafka_consumergroup_{current_offset,lag}{consumergroup,topic,partition}
kafka_consumergroup_{current_offset_sum,lag_sum}{consumergroup,topic}
kafka_consumergroup_members{consumergroup}                       GroupCollector
kafka_coordinator_group_group_rebalances_total{group}            GroupProbe
kafka_coordinator_group_groupmetadatamanager_offsetcommits_total{group}   GroupProbe
kafka_server_brokertopicmetrics_{total,failed}share{fetch,acknowledgement}requests_total{topic}
                                                                 ShareProbe (metrics/share.py)
kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType}      ShareProbe
kafka_server_sharegroupmetrics_partitionloadtimems{quantile}     ShareProbe (summary, ms)
kafka_server_share_coordinator_metrics_write{_total,_latency_avg,_latency_max}
                                                                 ShareProbe
kafka_server_group_coordinator_metrics_share_group_count{state}  ShareCollector
kafka_server_sharesessioncache_{sharesessionscount,sharepartitionscount}  ShareCollector
kafka_server_sharepartitionmetrics_{inflightmessagecount,inflightbatchcount}{group,topic,partition}
                                                                 ShareCollector
===============================================================  ===========================

The collectors read broker state when ``/metrics`` is scraped, through callbacks the broker
registers on ``BrokerMetrics`` (``watch_partition_logs``, ``watch_purgatory``,
``watch_groups``); storage code never holds a metrics object.
"""

from josefk.metrics.broker_metrics import BrokerMetrics
from josefk.metrics.collectors import (
    GROUP_STATES,
    GroupCollector,
    GroupPartitionStats,
    GroupStats,
    PartitionLogCollector,
    PartitionLogStats,
    PurgatoryCollector,
    PurgatoryStats,
)
from josefk.metrics.exporter import MetricsExporter
from josefk.metrics.probes import (
    LATENCY_BUCKETS,
    GroupProbe,
    LogDirProbe,
    ReplicationProbe,
    RequestProbe,
    SocketServerProbe,
    TopicProbe,
)

__all__ = [
    "GROUP_STATES",
    "LATENCY_BUCKETS",
    "BrokerMetrics",
    "GroupCollector",
    "GroupPartitionStats",
    "GroupProbe",
    "GroupStats",
    "LogDirProbe",
    "MetricsExporter",
    "PartitionLogCollector",
    "PartitionLogStats",
    "PurgatoryCollector",
    "PurgatoryStats",
    "ReplicationProbe",
    "RequestProbe",
    "SocketServerProbe",
    "TopicProbe",
]
