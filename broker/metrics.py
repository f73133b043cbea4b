"""Prometheus metrics, under the names the Prometheus JMX exporter gives Kafka's MBeans.

Kafka dashboards (Strimzi's, Confluent's, Grafana's "Kafka Overview") read Kafka's JMX MBeans through the
JMX exporter's usual rules (``lowercaseOutputName``; ``Count`` of a ``...PerSec`` meter becomes
``<domain>_<type>_<name>_total``, a gauge's ``Value`` becomes ``<domain>_<type>_<name>``), so odradek
exposes its figures under those names: ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t``
is ``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``. The list is in docs/operations.md.

The hot path stays cheap: a handler call costs a few dictionary increments per request and per partition,
never per record (messages in are the log end offset's advance). Everything else (partition, log, group
and connection figures) is read when Prometheus scrapes, on the HTTP server's thread; it reads the
broker's state without locks, taking snapshots of the dictionaries it walks. Off unless
``prometheus.port`` is set.
"""

from __future__ import annotations

import bisect
import inspect
import itertools
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import anyio
from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from odradek.broker.coordinator.group.group import GroupState
from odradek.protocol.api import ApiKey, Request
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.kafka_server import KafkaServer

# Request time buckets in ms (the metric is TotalTimeMs); the JMX exporter's quantiles are histogram_quantile().
TIME_BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
LOOP_LAG_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOOP_PROBE_EVERY_S = 0.25

# Partition errors Kafka's ReplicaManager does not count as failed produce/fetch requests: they are the
# client's to handle (FailedProduceRequestsPerSec means the broker failed, not the request was refused).
# Codes are kept as plain ints on the request path: hashing an IntEnum member runs Python code.
EXPECTED_PRODUCE_ERRORS = frozenset(int(code) for code in {
    ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.INVALID_TOPIC_EXCEPTION,
})
EXPECTED_FETCH_ERRORS = frozenset(int(code) for code in {
    ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.INCONSISTENT_TOPIC_ID,
    ErrorCode.OFFSET_OUT_OF_RANGE,
})


@dataclass
class TopicCounters:
    """One topic's (or all topics') BrokerTopicMetrics meters, as counts."""

    messagesin: int = 0
    bytesin: int = 0
    bytesout: int = 0
    totalproducerequests: int = 0
    failedproducerequests: int = 0
    totalfetchrequests: int = 0
    failedfetchrequests: int = 0


BROKER_TOPIC_METRICS: dict[str, str] = {
    "messagesin": "Records appended to leader logs (MessagesInPerSec)",
    "bytesin": "Bytes of record batches appended by producers (BytesInPerSec)",
    "bytesout": "Bytes of records sent to consumers (BytesOutPerSec)",
    "totalproducerequests": "Produce requests, counted per partition (TotalProduceRequestsPerSec)",
    "failedproducerequests": "Partition appends the broker failed (FailedProduceRequestsPerSec)",
    "totalfetchrequests": "Fetch requests, counted per partition (TotalFetchRequestsPerSec)",
    "failedfetchrequests": "Partition reads the broker failed (FailedFetchRequestsPerSec)",
}


@dataclass
class RequestTimes:
    """A histogram of one request type's total time: cumulative only at scrape."""

    buckets: list[int] = field(default_factory=lambda: [0] * (len(TIME_BUCKETS_MS) + 1))
    sum_ms: float = 0.0

    def observe(self, ms: float) -> None:
        self.buckets[bisect.bisect_left(TIME_BUCKETS_MS, ms)] += 1
        self.sum_ms += ms


def request_name(request: Request) -> str:
    """Kafka's RequestMetrics name: the API's, with Fetch split into FetchConsumer and FetchFollower."""
    if request.header.api_key == ApiKey.Fetch:
        body = request.body
        replica_id = body.replica_state.replica_id if request.header.api_version >= 15 else body.replica_id
        return "FetchFollower" if replica_id >= 0 else "FetchConsumer"
    return request.api.name


def _count_errors(body: Any, counts: dict[int, int]) -> None:
    """Every ``error_code`` in a response, counted into ``counts`` (Kafka's ``AbstractResponse.errorCounts``)."""
    stack = [body]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            code = item.get("error_code")
            if code is not None:
                code = int(code)
                counts[code] = counts.get(code, 0) + 1
            for v in item.values():
                if type(v) is dict or type(v) is list:
                    stack.append(v)
        else:
            for v in item:
                if type(v) is dict or type(v) is list:
                    stack.append(v)


class BrokerMetrics:
    """The counters the request path increments, and the collector that reads the rest at scrape time."""

    def __init__(self, server: "KafkaServer") -> None:
        self.server = server
        self.all_topics = TopicCounters()
        self.topics: dict[str, TopicCounters] = {}
        self.requests: defaultdict[tuple[str, int], int] = defaultdict(int)
        self.errors: defaultdict[tuple[str, int], int] = defaultdict(int)
        self.times: defaultdict[str, RequestTimes] = defaultdict(RequestTimes)
        self.loop_lag = [0] * (len(LOOP_LAG_BUCKETS_S) + 1)
        self.loop_lag_sum = 0.0
        self.listeners: list[tuple[str, int]] = []  # (listener name, bound port), for connection counts
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        ProcessCollector(registry=self.registry)
        self._http: Any = None
        self.port: int | None = None  # the endpoint's bound port

    # -- the request path ---------------------------------------------------------------------------------

    def observe(self, handle: Callable[["KafkaServer", Request], Any], server: "KafkaServer", request: Request) -> Any:
        """Call the handler, counting the request, its errors and time, and the topic figures of produce and fetch."""
        started = time.perf_counter()
        name = request_name(request)
        api_key = request.header.api_key
        self.requests[(name, request.header.api_version)] += 1
        appends = self._appends(request) if api_key == ApiKey.Produce else None
        try:
            result = handle(server, request)
        except Exception:
            self._finish(name, started, {int(ErrorCode.UNKNOWN_SERVER_ERROR): 1})
            raise
        if appends is not None:
            self._produced(appends)
        if type(result) is not dict and inspect.isawaitable(result):
            return self._complete(result, request, name, started)
        self._answered(result, api_key, name, started)
        return result

    async def _complete(self, result: Any, request: Request, name: str, started: float) -> Any:
        try:
            answer = await result
        except Exception:
            self._finish(name, started, {int(ErrorCode.UNKNOWN_SERVER_ERROR): 1})
            raise
        self._answered(answer, request.header.api_key, name, started)
        return answer

    def _answered(self, answer: Any, api_key: int, name: str, started: float) -> None:
        errors: dict[int, int] = {}
        if type(answer) is not dict:
            pass  # acks=0 or a closed connection: no response, no error codes
        elif api_key == ApiKey.Produce:
            self._produce_results(answer, errors)
        elif api_key == ApiKey.Fetch:
            self._fetch_results(answer, errors, bytes_out=name == "FetchConsumer")
        else:
            _count_errors(answer, errors)
        self._finish(name, started, errors)

    def _finish(self, name: str, started: float, errors: dict[int, int]) -> None:
        self.times[name].observe((time.perf_counter() - started) * 1000)
        for code, count in errors.items():
            self.errors[(name, code)] += count

    def _counters(self, topic: str) -> TopicCounters:
        """The topic's counters. A topic the cluster does not have (a misspelt or hostile name) gets a
        throwaway set: requests must not grow the broker's memory."""
        counters = self.topics.get(topic)
        if counters is None:
            counters = TopicCounters()
            if topic in self.server.metadata.topics:
                self.topics[topic] = counters
        return counters

    def _appends(self, request: Request) -> list[tuple[TopicCounters, Any, int, int]]:
        """Per partition of a produce request: its topic's counters, the partition, its log end offset
        before the append, and the batches' size."""
        partitions = self.server.replica_manager.partitions
        out = []
        # Attribute reads, which a decoded body (C getters) and a front's (broker/network/forwarded_produce.py,
        # its topics' partitions being the appends) both answer.
        for topic_data in request.body.topic_data:
            name = topic_data.name
            counters = self._counters(name)
            for pd in topic_data.partition_data:
                partition = partitions.get((name, pd.index))
                records = pd.records
                out.append((counters, partition, partition.log_end_offset if partition is not None else 0, len(records) if records is not None else 0))
        return out

    def _produced(self, appends: list[tuple[TopicCounters, Any, int, int]]) -> None:
        """Messages in are the log end offset's advance (Kafka's ``LogAppendInfo.numMessages``), bytes in the
        appended batches' size, counted for partitions that took the append."""
        everything = self.all_topics
        for counters, partition, leo_before, size in appends:
            appended = partition.log_end_offset - leo_before if partition is not None else 0
            counters.totalproducerequests += 1
            everything.totalproducerequests += 1
            if appended > 0:
                counters.messagesin += appended
                counters.bytesin += size
                everything.messagesin += appended
                everything.bytesin += size

    def _produce_results(self, answer: dict, errors: dict[int, int]) -> None:
        for topic in answer["responses"]:
            counters = self._counters(topic["name"])
            for p in topic["partition_responses"]:
                code = int(p["error_code"])
                errors[code] = errors.get(code, 0) + 1
                if code not in EXPECTED_PRODUCE_ERRORS:
                    counters.failedproducerequests += 1
                    self.all_topics.failedproducerequests += 1

    def _fetch_results(self, answer: dict, errors: dict[int, int], *, bytes_out: bool) -> None:
        errors[int(answer.get("error_code", 0))] = 1
        by_id = self.server.replica_manager.by_topic_id
        everything = self.all_topics
        for topic in answer["responses"]:
            counters = self._counters(topic.get("topic") or by_id.get(topic.get("topic_id"), ""))
            for p in topic["partitions"]:
                code = int(p["error_code"])
                errors[code] = errors.get(code, 0) + 1
                counters.totalfetchrequests += 1
                everything.totalfetchrequests += 1
                if code not in EXPECTED_FETCH_ERRORS:
                    counters.failedfetchrequests += 1
                    everything.failedfetchrequests += 1
                if bytes_out:
                    records = p.get("records")
                    size = getattr(records, "length", None)
                    if size is None:
                        size = len(records) if records is not None else 0
                    counters.bytesout += size
                    everything.bytesout += size

    # -- the event loop -----------------------------------------------------------------------------------

    async def probe_event_loop(self) -> None:
        """How late the event loop wakes a sleeper: a handler or duty that blocks it shows up here."""
        while True:
            asleep = time.perf_counter()
            await anyio.sleep(LOOP_PROBE_EVERY_S)
            lag = max(0.0, time.perf_counter() - asleep - LOOP_PROBE_EVERY_S)
            self.loop_lag[bisect.bisect_left(LOOP_LAG_BUCKETS_S, lag)] += 1
            self.loop_lag_sum += lag

    # -- the endpoint -------------------------------------------------------------------------------------

    def start_http(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on its own thread; the bound port."""
        self._http, _ = start_http_server(port, host, registry=self.registry)
        self.port = self._http.server_port
        return self.port

    def stop_http(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    # -- scrape -------------------------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        yield from self._broker_topic_metrics()
        yield from self._request_metrics()
        yield from self._partition_metrics()
        yield from self._group_metrics()
        yield self._connections()
        yield _histogram("odradek_event_loop_lag_seconds", "How late the event loop woke a 250 ms sleeper", LOOP_LAG_BUCKETS_S, [], [([], list(self.loop_lag), self.loop_lag_sum)])

    def _broker_topic_metrics(self) -> Iterator[Metric]:
        live = self.server.metadata.topics
        topics = []
        for topic, counters in list(self.topics.items()):
            if topic in live:
                topics.append((topic, counters))
            else:
                self.topics.pop(topic, None)  # a deleted topic's series go (and restart from 0), as Kafka removes its topic metrics
        for field_name, doc in BROKER_TOPIC_METRICS.items():
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{field_name}_total", doc, labels=["topic"])
            family.add_metric([], getattr(self.all_topics, field_name))
            for topic, counters in topics:
                family.add_metric([topic], getattr(counters, field_name))
            yield family

    def _request_metrics(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests_total", "Requests received, by type and version (RequestsPerSec)", labels=["request", "version"])
        for (name, version), count in list(self.requests.items()):
            requests.add_metric([name, str(version)], count)
        yield requests
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors_total", "Error codes in responses, NONE included (ErrorsPerSec)", labels=["request", "error"])
        for (name, code), count in list(self.errors.items()):
            errors.add_metric([name, _error_name(code)], count)
        yield errors
        times = [([name], list(t.buckets), t.sum_ms) for name, t in list(self.times.items())]
        yield _histogram("kafka_network_requestmetrics_totaltimems", "Time from a request's dispatch to its answer, in ms (TotalTimeMs)", TIME_BUCKETS_MS, ["request"], times)

    def _partition_metrics(self) -> Iterator[Metric]:
        server = self.server
        partitions = list(server.replica_manager.partitions.values())
        min_isr = server.config["min.insync.replicas"]
        leaders = [p for p in partitions if p.is_leader]
        yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions on this broker", len(partitions))
        yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads", len(leaders))
        yield _gauge("kafka_server_replicamanager_underreplicatedpartitions", "Led partitions whose ISR is smaller than their replica set", sum(len(p.isr) < len(p.state.replicas) for p in leaders))
        yield _gauge("kafka_server_replicamanager_underminisrpartitioncount", "Led partitions whose ISR is smaller than min.insync.replicas", sum(len(p.isr) < min_isr for p in leaders))
        yield _gauge("kafka_server_replicamanager_offlinereplicacount", "Replicas on an offline log directory", len(server.replica_manager.offline_partitions))
        topics = list(server.metadata.topics.values())
        states = [state for topic in topics for state in list(topic.partitions.values())]
        yield _gauge("kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller (the embedded controller always is)", 1)
        yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a live leader", sum(s.leader < 0 for s in states))
        yield _gauge("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster", len(topics))
        yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster", len(states))
        log_gauges = {
            "size": ("Bytes of the partition's segments (Log Size)", lambda p: p.size_in_bytes),
            "numlogsegments": ("Segments of the partition's log (NumLogSegments)", lambda p: p.num_log_segments),
            "logstartoffset": ("The partition's log start offset (LogStartOffset)", lambda p: p.log_start_offset),
            "logendoffset": ("The partition's log end offset (LogEndOffset)", lambda p: p.log_end_offset),
        }
        for name, (doc, read) in log_gauges.items():
            family = GaugeMetricFamily(f"kafka_log_log_{name}", doc, labels=["topic", "partition"])
            for p in partitions:
                family.add_metric([p.topic, str(p.index)], read(p))
            yield family

    def _group_metrics(self) -> Iterator[Metric]:
        coordinator = self.server.coordinators.built.get("group")  # none built: no group yet, none to build for it
        groups = list(coordinator.coordinator.groups.values()) if coordinator is not None else []
        by_state = {state: 0 for state in GroupState}
        for group in groups:
            by_state[group.state] += 1
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield _gauge(prefix + "numgroups", "Groups this coordinator manages (NumGroups)", len(groups))
        for state in GroupState:
            yield _gauge(prefix + "numgroups" + state.value.lower(), f"Groups in state {state.value} (NumGroups{state.value})", by_state[state])
        yield _gauge(prefix + "numoffsets", "Committed offsets cached (NumOffsets)", sum(len(g.offsets) for g in groups))

    def _connections(self) -> Metric:
        """Established connections per listener (socket-server-metrics connection-count), from the kernel's
        socket table: the network layer keeps no count of its own to pay for."""
        family = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count", "Connections open on the listener (connection-count)", labels=["listener", "networkProcessor"])
        established = _established_local_ports()
        for name, port in self.listeners:
            family.add_metric([name, "0"], established.get(port, 0))
        return family


def _gauge(name: str, doc: str, value: float) -> Metric:
    return GaugeMetricFamily(name, doc, value=value)


def _histogram(name: str, doc: str, bounds: Iterable[float], labels: list[str], series: list[tuple[list[str], list[int], float]]) -> Metric:
    """A histogram family from (label values, per-bucket counts, sum) series; Prometheus wants cumulative buckets."""
    family = HistogramMetricFamily(name, doc, labels=labels)
    edges = [str(b) for b in bounds] + ["+Inf"]
    for label_values, counts, total in series:
        family.add_metric(label_values, list(zip(edges, itertools.accumulate(counts))), total)
    return family


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


_TCP_ESTABLISHED = "01"


def _established_local_ports() -> dict[int, int]:
    """Established TCP connections per local port, from /proc/net/tcp and tcp6 (Linux; empty elsewhere)."""
    counts: dict[int, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split(None, 4)
                    if len(fields) > 3 and fields[3] == _TCP_ESTABLISHED:
                        port = int(fields[1].rsplit(":", 1)[1], 16)
                        counts[port] = counts.get(port, 0) + 1
        except OSError:
            continue
    return counts
