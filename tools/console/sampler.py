"""The figures the live charts and the lag chart draw, sampled every few seconds while the console is in use.

Rates come from counters sampled twice: bytes in and out and requests per broker and per topic from each
odradek broker's Prometheus endpoint (the same counters Kafka's JMX meters count, found from the broker's own
``prometheus.port`` config); records per topic from the log end offsets (ListOffsets), which every Kafka
has. A broker without such an endpoint (Apache Kafka serves its meters over JMX only) is drawn from what
the Kafka protocol tells instead: its log directories' growth on disk (DescribeLogDirs) for bytes in, and
nothing for bytes out and requests, which the protocol does not expose. A group's lag per partition is the
log end offset minus its committed offset (OffsetFetch), and its total lag their sum.

The series keep :data:`HISTORY_S` of samples, aligned on one time axis as the charting library wants them;
sampling pauses when no page has been asked for :data:`IDLE_AFTER_S`, so a console nobody looks at costs
the cluster nothing.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass, field

import aiohttp
import anyio
import anyio.to_thread
from prometheus_client.parser import text_string_to_metric_families

from odradek.broker.network.kafka_client import KafkaClient
from odradek.tools.console.cluster import ADMIN_ERRORS, ClusterView, read_cluster
from odradek.tools.admin_groups import committed_offsets
from odradek.tools.console.groups import list_group_states

log = logging.getLogger("odradek.console")

INTERVAL_S = 2.0
HISTORY_S = 600.0
IDLE_AFTER_S = 900.0
SCRAPE_TIMEOUT_S = 2.0
CONFIG_REFRESH_S = 30.0
"""How often the brokers' configs (where their metrics are) and log dir sizes are asked again."""
MAX_GROUPS = 100
"""Groups whose lag is sampled, at most (the first by name)."""

BYTES_IN, BYTES_OUT, MESSAGES_IN = "kafka_server_brokertopicmetrics_bytesin_total", "kafka_server_brokertopicmetrics_bytesout_total", "kafka_server_brokertopicmetrics_messagesin_total"
REQUESTS = "kafka_network_requestmetrics_requests_total"

CHARTS = {
    "broker_bytes_in": "Bytes in per second, per broker",
    "broker_bytes_out": "Bytes out per second, per broker",
    "broker_requests": "Requests per second, per broker",
    "broker_disk_growth": "Log directories' growth on disk, bytes per second, per broker (no metrics endpoint)",
    "topic_bytes_in": "Bytes in per second, per topic",
    "topic_bytes_out": "Bytes out per second, per topic",
    "topic_records": "Records in per second, per topic (log end offsets)",
}


@dataclass
class Series:
    """Samples on one time axis: ``times`` and, per chart and line, a value (or None) for each time."""

    times: collections.deque = field(default_factory=lambda: collections.deque(maxlen=int(HISTORY_S / INTERVAL_S)))
    lines: dict[str, dict[str, collections.deque]] = field(default_factory=dict)

    def add(self, at: float, values: dict[str, dict[str, float | None]]) -> None:
        self.times.append(at)
        width = self.times.maxlen
        for chart, by_label in values.items():
            lines = self.lines.setdefault(chart, {})
            for label in by_label:
                if label not in lines:
                    lines[label] = collections.deque([None] * (len(self.times) - 1), maxlen=width)
        for chart, lines in self.lines.items():
            for label, line in lines.items():
                line.append(values.get(chart, {}).get(label))

    def chart(self, chart: str) -> dict:
        """uPlot's data: the times (seconds) and one array per line, with the lines' labels."""
        lines = self.lines.get(chart, {})
        return {"times": list(self.times), "labels": list(lines), "values": [list(v) for v in lines.values()]}


class Sampler:
    def __init__(self, client: KafkaClient, interval_s: float = INTERVAL_S) -> None:
        self.client = client
        self.interval_s = interval_s
        self.series = Series()
        self.last_use = float("-inf")
        """When a page was last asked for: sampling starts with the first."""
        self.metrics_urls: dict[int, str] = {}
        """Broker id to its Prometheus endpoint, for the brokers that have one."""
        self.configured = anyio.Event()
        """Set once the brokers' configs have been read: until then :attr:`has_metrics` is not known."""
        self.brokers: list[int] = []
        self._previous: dict[tuple[str, str], float] = {}
        self._previous_at = 0.0
        self._configs_at = float("-inf")
        self._disk: dict[int, int] = {}

    def touch(self) -> None:
        """A page was asked for: keep (or start again) sampling."""
        self.last_use = time.monotonic()

    @property
    def has_metrics(self) -> bool:
        return bool(self.metrics_urls)

    async def run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S)) as http:
            while True:
                if time.monotonic() - self.last_use < IDLE_AFTER_S:
                    try:
                        await self.sample(http)
                    except ADMIN_ERRORS as exc:
                        log.warning("Console sampling failed: %s", exc)
                    except Exception:  # noqa: BLE001 -- a fault of the console must never stop the broker it runs in
                        log.exception("Console sampling failed")
                await anyio.sleep(self.interval_s)

    async def sample(self, http: aiohttp.ClientSession) -> None:
        now = time.time()
        detailed = time.monotonic() - self._configs_at >= CONFIG_REFRESH_S
        view = await read_cluster(self.client, sizes=detailed or not self.has_metrics, broker_configs=detailed)
        if detailed:
            self._configs_at = time.monotonic()
            self.metrics_urls = {b.node_id: b.metrics_url for b in view.brokers if b.metrics_url}
            self.configured.set()
        self.brokers = [b.node_id for b in view.brokers]
        counters: dict[tuple[str, str], float] = collections.defaultdict(float)
        counters.update(self._offset_counters(view))
        for node_id, url in self.metrics_urls.items():
            await self._scrape(http, node_id, url, counters)
        if not self.has_metrics:
            counters.update({("broker_disk_growth", f"broker {b.node_id}"): float(b.log_dir_bytes) for b in view.brokers if b.log_dir_bytes is not None})
        values: dict[str, dict[str, float | None]] = {}
        elapsed = now - self._previous_at
        for (chart, label), count in counters.items():
            before = self._previous.get((chart, label))
            rate = (count - before) / elapsed if before is not None and elapsed > 0 else None
            values.setdefault(chart, {})[label] = None if rate is None else max(rate, 0.0)
        self._previous, self._previous_at = dict(counters), now
        ends = {(p.topic, p.partition): p.log_end for t in view.topics for p in t.partitions if p.log_end is not None}
        for group_id, _, _ in (await list_group_states(self.client))[:MAX_GROUPS]:
            try:
                committed = await committed_offsets(self.client, group_id)
            except ADMIN_ERRORS:
                continue
            lags = {f"{t}-{p}": float(max(ends[(t, p)] - offset, 0)) for (t, p), offset in committed.items() if (t, p) in ends}
            values[f"lag:{group_id}"] = {"total lag": sum(lags.values()), **lags}
        self.series.add(now, values)

    @staticmethod
    def _offset_counters(view: ClusterView) -> dict[tuple[str, str], float]:
        return {("topic_records", t.name): float(sum(p.log_end or 0 for p in t.partitions)) for t in view.topics if not t.internal}

    async def _scrape(self, http: aiohttp.ClientSession, node_id: int, url: str, out: dict[tuple[str, str], float]) -> None:
        """One broker's counters added into ``out``: its totals per broker chart, its per-topic figures into
        the topic charts (a topic's sum over the brokers that lead its partitions)."""
        try:
            async with http.get(url) as response:
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("Console could not read the metrics of broker %d at %s: %s", node_id, url, exc)
            return
        broker = f"broker {node_id}"
        topic_chart = {BYTES_IN: "topic_bytes_in", BYTES_OUT: "topic_bytes_out"}
        broker_chart = {BYTES_IN: "broker_bytes_in", BYTES_OUT: "broker_bytes_out"}
        families = await anyio.to_thread.run_sync(lambda: list(text_string_to_metric_families(text)))  # CPU work, off the loop
        for family in families:
            for sample in family.samples:
                if sample.name in topic_chart:
                    topic = sample.labels.get("topic")
                    if topic:
                        out[(topic_chart[sample.name], topic)] += sample.value
                    else:
                        out[(broker_chart[sample.name], broker)] += sample.value
                elif sample.name == REQUESTS:
                    out[("broker_requests", broker)] += sample.value

    def latest(self, chart: str, label: str) -> float | None:
        line = self.series.lines.get(chart, {}).get(label)
        return line[-1] if line else None

    def charts(self) -> dict[str, dict]:
        return {name: self.series.chart(name) | {"title": title} for name, title in CHARTS.items() if self.series.lines.get(name)}
