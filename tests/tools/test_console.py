"""The web console, used as a person uses it: headless Chromium (Debian's ``chromium``, driven by Playwright's
Python API; Playwright's own browser download is never used) against

- odradek: a two-broker ZooKeeper cluster, the console served by broker 2 (``console.listener``), and
- Apache Kafka 3.9.1 (the suite's real Kafka), the console as a process of its own
  (``odradek console --bootstrap-server``),

with real clients (confluent-kafka) producing, consuming and checking what the console did. Every page's
screenshot is kept under the test's temporary directory (``console-screenshots/<target>/``), and copied to
``$ODRADEK_CONSOLE_SCREENSHOTS`` when set (how docs/console/*.png are made). Each test checks that the browser
logged no error.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import subprocess as sp
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ConfigResource, ConfigSource, NewTopic, ResourcePatternType, ResourceType
from playwright.sync_api import sync_playwright

from odradek import Broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jvm"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kafka_jvm  # noqa: E402
from polling import wait_for  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CONSOLE_LINE = re.compile(r"Console at http://([\d.]+):(\d+)/")
SAMPLE_WAIT_S = 30.0


@dataclass
class Target:
    name: str
    url: str
    bootstrap: str
    shots: Path

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})


def _console_address(lines: Callable[[], list[str]], timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in lines():
            match = CONSOLE_LINE.search(line)
            if match:
                return f"http://{match.group(1)}:{match.group(2)}"
        time.sleep(0.1)
    raise AssertionError("the console never said where it serves:\n" + "".join(lines()[-30:]))


@contextlib.contextmanager
def two_brokers(root: Path, config: Callable[[int], dict[str, str]]) -> Iterator[tuple[list[Broker], str]]:
    """ZooKeeper and odradek brokers 1 and 2, each with ``config(id)``, broker 2 serving the console (the
    brokers, the console's URL), both in the metadata; all stopped afterwards, the last at once
    (:data:`kafka_jvm.CLUSTER_STOP_SETTINGS`)."""
    zookeeper = kafka_jvm.ZooKeeper(root / "zookeeper").start()
    brokers: list[Broker] = []
    try:
        for broker_id in (1, 2):
            props = {"broker.id": str(broker_id), "zookeeper.connect": zookeeper.connect, **kafka_jvm.CLUSTER_STOP_SETTINGS, **config(broker_id)}
            if broker_id == 2:
                props["console.listener"] = "http://127.0.0.1:0"
            brokers.append(Broker(log_dir=root / f"broker{broker_id}", subprocess=True, config=props).start())
            kafka_jvm.wait_until_serving(brokers[-1].bootstrap, kafka_jvm.STARTUP_TIMEOUT_S)  # knows the controller
        url = _console_address(lambda: list(brokers[1].output))
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 2, timeout_s=60, what="both brokers in the metadata")
        yield brokers, url
    finally:
        for b in brokers:
            b.stop()
        zookeeper.stop()


@pytest.fixture(scope="module")
def odradek_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The console's cluster for most tests (bootstrap, console URL): replicated, with racks and metrics."""
    def config(broker_id: int) -> dict[str, str]:
        return {
            "offsets.topic.replication.factor": "2",
            "default.replication.factor": "2",
            "prometheus.port": str(kafka_jvm.free_port()),
            "prometheus.host": "127.0.0.1",
            "broker.rack": f"rack-{broker_id}",
        }

    with two_brokers(tmp_path_factory.mktemp("console-cluster"), config) as (brokers, url):
        yield brokers[0].bootstrap, url


@contextlib.contextmanager
def console_process(log: Path, *args: str) -> Iterator[tuple[sp.Popen, str]]:
    """``odradek console ARGS``, a process of its own writing to ``log`` (it, and the URL it serves at);
    ended afterwards."""
    with log.open("w") as out:
        proc = sp.Popen([sys.executable, "-m", "odradek", "console", *args], stdout=out, stderr=sp.STDOUT)
    try:
        yield proc, _console_address(lambda: log.read_text().splitlines())
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def kafka_console(real_kafka: kafka_jvm.RealKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``odradek console`` as a process of its own against the real Kafka (bootstrap, console URL)."""
    log = tmp_path_factory.mktemp("kafka-console") / "console.log"
    with console_process(log, "--bootstrap-server", real_kafka.bootstrap, "--listener", "http://127.0.0.1:0") as (_, url):
        yield real_kafka.bootstrap, url


@pytest.fixture(scope="module", params=["odradek", "kafka"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Target:
    bootstrap, url = request.getfixturevalue("odradek_cluster" if request.param == "odradek" else "kafka_console")
    shots = tmp_path_factory.getbasetemp() / "console-screenshots" / request.param
    shots.mkdir(parents=True, exist_ok=True)
    return Target(request.param, url, bootstrap, shots)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@contextlib.contextmanager
def browser_tab(browser, base_url: str) -> Iterator[object]:
    """A browser tab on a console; fails if the page logged an error or threw, or asked anything of another
    site than the console (a CDN: the console must work offline)."""
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    tab.on("request", lambda r: None if r.url.startswith(base_url + "/") else errors.append(f"request to another site: {r.url}"))
    yield tab
    context.close()
    assert errors == []


@pytest.fixture
def page(browser, target: Target) -> Iterator[object]:
    with browser_tab(browser, target.url) as tab:
        yield tab


def screenshot(page, target: Target, name: str) -> None:
    path = target.shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    keep = os.environ.get("ODRADEK_CONSOLE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / f"{target.name}-{name}.png")


def unique(prefix: str, target: Target) -> str:
    """A name of its own per run: the real Kafka is shared by the whole suite."""
    return f"{prefix}-{target.name}-{time.monotonic_ns() % 10**9}"


def chart_last(page, selector: str, label: str) -> float | None:
    """The latest value of one line of a chart, as the page drew it."""
    return json.loads(page.locator(selector).get_attribute("data-last") or "{}").get(label)


def flash(page) -> str:
    return page.locator(".flash").first.inner_text()


# -- the tests -------------------------------------------------------------------------------------------------


def test_problem_partitions_are_highlighted(page, target: Target) -> None:
    """A partition whose ISR is smaller than its topic's min.insync.replicas, on the cluster page and the topic's."""
    name = unique("short-isr", target)
    admin = target.admin()
    admin.create_topics([NewTopic(name, 1, 1, config={"min.insync.replicas": "2"})])[name].result(15)
    page.goto("/")
    row = page.locator("#problems tr.bad", has_text=name)
    wait_for(lambda: (page.reload(), row.count() == 1)[1], timeout_s=15, what="the topic in the console's metadata")  # the console's broker learns of it from the controller
    assert "under min ISR" in row.inner_text()
    page.goto(f"/topics/{name}")
    assert page.locator('#partitions tr[data-partition="0"]').get_attribute("class") == "bad"
    page.goto("/topics")
    assert "1 under min ISR" in page.locator(f'#topics tr[data-topic="{name}"]').inner_text()
    admin.delete_topics([name])[name].result(15)


def test_offline_and_under_replicated_partitions_are_highlighted(browser, tmp_path: Path) -> None:
    """Two brokers of its own, the console on broker 2; broker 1 stops: the partition it alone held is
    offline, the one it shared with broker 2 under-replicated, on the cluster, topics and topic pages."""
    with two_brokers(tmp_path, lambda broker_id: {"offsets.topic.replication.factor": "1"}) as (brokers, url):
        admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
        for f in admin.create_topics([NewTopic("alone", 1, replica_assignment=[[1]]), NewTopic("shared", 1, replica_assignment=[[1, 2]])]).values():
            f.result(15)
        wait_for(lambda: all(len(p.isrs) == len(p.replicas) for t in ("alone", "shared") for p in admin.list_topics(t, timeout=10).topics[t].partitions.values()), timeout_s=30, what="full ISRs")
        brokers[0].stop()

        def seen_by_a_client() -> bool:
            topics = admin.list_topics(timeout=10).topics
            return topics["alone"].partitions[0].leader == -1 and topics["shared"].partitions[0].isrs == [2]

        wait_for(seen_by_a_client, timeout_s=60, what="broker 1's partitions offline and under-replicated to a client")
        with browser_tab(browser, url) as tab:
            tab.goto("/")
            problems = {row.locator("td").first.inner_text(): row.locator("td").last.inner_text() for row in tab.locator("#problems tr.bad").all()}
            assert problems == {"alone": "offline", "shared": "under-replicated"}
            assert tab.locator("#problems tr.bad", has_text="alone").locator("td").nth(2).inner_text() == "none"  # no leader
            tab.goto("/topics")
            assert "1 offline" in tab.locator('#topics tr[data-topic="alone"]').inner_text()
            assert "1 under-replicated" in tab.locator('#topics tr[data-topic="shared"]').inner_text()
            for topic in ("alone", "shared"):
                tab.goto(f"/topics/{topic}")
                assert tab.locator('#partitions tr[data-partition="0"]').get_attribute("class") == "bad"


def test_cluster_page_shows_every_broker_and_the_controller(page, target: Target) -> None:
    admin = target.admin()
    name = unique("placed", target)
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(15)
    nodes = {n.id: n for n in admin.describe_cluster().result(10).nodes}
    metadata = admin.list_topics(timeout=10)
    page.goto("/")
    rows = page.locator("#brokers tbody tr")
    assert rows.count() == len(metadata.brokers)
    assert page.locator("#controller").inner_text() == str(metadata.controller_id)
    assert re.fullmatch(r"\d+", page.locator("#controller-epoch").inner_text())  # ZooKeeper mode, both
    for node_id, broker in metadata.brokers.items():
        row = page.locator(f'#brokers tr[data-broker="{node_id}"]')
        assert row.count() == 1
        # the address a client reaches it at, with the port it is bound to (the brokers listen on port 0)
        listeners = row.locator(".listeners").inner_text()
        assert f"PLAINTEXT://{broker.host}:{broker.port}" in listeners and not re.search(r":0\b", listeners), listeners
        assert row.locator(".rack").inner_text() == (nodes[node_id].rack or "–")
        assert re.fullmatch(r"3\.9-IV\d", row.locator(".version").inner_text())

    def partitions_per_broker_shown() -> bool:
        page.reload()  # the console's broker learns of the topic from the controller
        now = admin.list_topics(timeout=10)
        partitions = [p for t in now.topics.values() for p in t.partitions.values()]
        return all(
            page.locator(f'#brokers tr[data-broker="{node_id}"] .leaders').inner_text() == str(sum(p.leader == node_id for p in partitions))
            and page.locator(f'#brokers tr[data-broker="{node_id}"] .replicas').inner_text() == str(sum(node_id in p.replicas for p in partitions))
            for node_id in now.brokers
        )

    wait_for(partitions_per_broker_shown, timeout_s=15, what="each broker's leaders and replicas as a client sees them")
    screenshot(page, target, "cluster")
    admin.delete_topics([name])[name].result(15)


def test_topic_created_in_the_console_appears_to_a_client(page, target: Target) -> None:
    name = unique("made-in-console", target)
    page.goto("/topics")
    page.fill("#create-topic input[name=name]", name)
    page.fill("#create-topic input[name=partitions]", "3")
    page.fill("#create-topic input[name=replication_factor]", "1")
    page.click("#create-topic button")
    assert flash(page) == f"Created topic {name}."
    admin = target.admin()
    wait_for(lambda: name in admin.list_topics(timeout=10).topics, timeout_s=15, what="the topic in a client's metadata")
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 3

    # the admin API's errors, shown as they come
    page.goto("/topics")
    page.fill("#create-topic input[name=name]", name)
    page.click("#create-topic button")
    assert "already exists" in page.locator(".flash.error").inner_text()

    # a config, with its source; a bad value refused with the broker's message
    page.goto(f"/topics/{name}")
    page.fill("#alter-config input[name=key]", "retention.ms")
    page.fill("#alter-config input[name=value]", "3600000")
    page.click("#alter-config button:not([name])")
    assert flash(page) == "Set retention.ms=3600000."
    row = page.locator('#configs tr[data-config="retention.ms"]').inner_text()
    assert "3600000" in row and "DYNAMIC_TOPIC_CONFIG" in row
    page.fill("#alter-config input[name=key]", "cleanup.policy")
    page.fill("#alter-config input[name=value]", "sometimes")
    page.click("#alter-config button:not([name])")
    assert "cleanup.policy" in page.locator(".flash.error").inner_text()
    page.fill("#alter-config input[name=key]", "retention.ms")
    page.click("#alter-config button[name=remove]")
    assert flash(page) == "Removed retention.ms."
    assert "DYNAMIC_TOPIC_CONFIG" not in page.locator('#configs tr[data-config="retention.ms"]').inner_text()
    described = admin.describe_configs([ConfigResource("topic", name)])
    assert next(iter(described.values())).result(10)["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    page.fill("#add-partitions input[name=count]", "4")
    page.click("#add-partitions button")
    assert flash(page) == f"Topic {name} now has 4 partitions."
    assert page.locator("#partitions tbody tr").count() == 4

    # each partition as a client sees it: leader, replicas, ISR, log start and end offsets
    producer = Producer({"bootstrap.servers": target.bootstrap})
    for i in range(5):
        producer.produce(name, value=b"r", partition=0)
    producer.flush(15)
    page.reload()
    for partition in admin.list_topics(name, timeout=10).topics[name].partitions.values():
        row = page.locator(f'#partitions tr[data-partition="{partition.id}"]')
        assert row.locator(".leader").inner_text() == str(partition.leader)
        assert row.locator(".replicas").inner_text() == ",".join(map(str, partition.replicas))
        assert row.locator(".isr").inner_text() == ",".join(map(str, partition.isrs))
        assert (row.locator(".log-start").inner_text(), row.locator(".log-end").inner_text()) == ("0", "5" if partition.id == 0 else "0")
    screenshot(page, target, "topic")

    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#delete-topic button")
    assert flash(page) == f"Deleted topic {name}."
    wait_for(lambda: name not in admin.list_topics(timeout=10).topics, timeout_s=15, what="the topic gone from a client's metadata")


def test_a_message_produced_by_a_client_is_found_by_offset_and_by_timestamp(page, target: Target) -> None:
    name = unique("browse", target)
    admin = target.admin()
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(15)
    base = int(time.time() * 1000) - 60_000
    producer = Producer({"bootstrap.servers": target.bootstrap})
    for i in range(20):
        producer.produce(name, key=f"k{i}", value=f'{{"n": {i}, "text": "record {i}"}}', partition=0, timestamp=base + i * 1000, headers=[("source", b"test")])
    producer.flush(15)

    page.goto(f"/topics/{name}/messages?partition=0&offset=7&order=oldest&limit=3")
    offsets = page.locator("#messages tbody tr").evaluate_all("rows => rows.map(r => r.dataset.offset)")
    assert offsets == ["7", "8", "9"]
    first = page.locator("#messages tbody tr").first
    assert first.locator(".key").inner_text() == "k7"
    assert first.locator(".timestamp").inner_text() == time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((base + 7000) // 1000)) + f".{(base + 7000) % 1000:03d}Z"
    assert "source" in first.inner_text() and "test" in first.inner_text()

    page.goto(f"/topics/{name}/messages?partition=0&timestamp={base + 12_000}&order=oldest&limit=1")
    assert page.locator("#messages tbody tr").first.get_attribute("data-offset") == "12"
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((base + 12_000) / 1000)) + f".{(base + 12_000) % 1000:03d}Z"
    page.goto(f"/topics/{name}/messages?partition=0&timestamp={iso}&order=oldest&limit=1")
    assert page.locator("#messages tbody tr").first.get_attribute("data-offset") == "12"

    page.goto(f"/topics/{name}/messages?partition=0&limit=5")  # newest first by default
    offsets = page.locator("#messages tbody tr").evaluate_all("rows => rows.map(r => r.dataset.offset)")
    assert offsets == ["19", "18", "17", "16", "15"]

    page.goto(f"/topics/{name}/messages?partition=0&contains=record%2013&format=json")
    rows = page.locator("#messages tbody tr")
    assert rows.count() == 1 and rows.first.get_attribute("data-offset") == "13"
    assert rows.first.locator(".value").inner_text() == '{\n  "n": 13,\n  "text": "record 13"\n}'
    for i in range(1200):  # the newest first filtered read goes back window by window
        producer.produce(name, key=b"filler", value=b"f", partition=0)
    producer.flush(15)
    page.goto(f"/topics/{name}/messages?partition=0&key=k3&format=hex")
    assert page.locator("#messages tbody tr").count() == 1
    assert page.locator("#messages tbody tr").first.locator(".key").inner_text() == "6b 33"
    assert "1 shown of 1220 read" in page.locator("#browse-summary").inner_text()  # three windows back, to the start
    screenshot(page, target, "messages")

    # a test record from the console, read back by a client
    page.goto(f"/topics/{name}/messages?partition=1")
    page.fill("#produce input[name=key]", "from-console")
    page.fill("#produce textarea[name=value]", "hello from the browser")
    page.fill("#produce textarea[name=headers]", "origin=console\ntrace=42")
    page.click("#produce button")
    assert flash(page) == "Produced a record at offset 0."
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": unique("reader", target), "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(name, 1, 0)])
        message = wait_for(lambda: consumer.poll(1.0), timeout_s=20, what="the console's record")
        assert (message.key(), message.value(), message.headers()) == (b"from-console", b"hello from the browser", [("origin", b"console"), ("trace", b"42")])
    finally:
        consumer.close()


def test_lag_chart_moves_while_a_consumer_is_paused(page, target: Target) -> None:
    topic, group = unique("lagging", target), unique("paused-group", target)
    producer = Producer({"bootstrap.servers": target.bootstrap})
    for i in range(10):
        producer.produce(topic, value=b"x" * 100, partition=0)
    producer.flush(15)  # auto-created topic
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 10 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                seen += 1
        assert seen == 10
        consumer.commit(asynchronous=False)
        consumer.pause(consumer.assignment())

        page.goto(f"/groups/{group}")
        assert page.locator("#group-state").inner_text() == "Stable"
        assert (page.locator("#group-protocol-type").inner_text(), page.locator("#group-assignor").inner_text()) == ("consumer", "range")
        member = page.locator("#members tbody tr")
        assert member.count() == 1
        assert member.locator(".client-id").inner_text() == "rdkafka" and member.locator(".assignment").inner_text() == f"{topic}-0"
        assert page.locator(f'#offsets tr[data-tp="{topic}-0"] .committed').inner_text() == "10"
        chart = page.locator("#lag-chart")
        wait_for(lambda: (consumer.poll(0.1), chart_last(page, "#lag-chart", "total lag") == 0)[1], timeout_s=SAMPLE_WAIT_S, what="a sample of lag 0")
        for expected in (50, 100):  # the chart follows the lag up while the consumer stays paused
            for i in range(50):
                producer.produce(topic, value=b"y" * 100, partition=0)
            producer.flush(15)
            wait_for(lambda: (consumer.poll(0.1), chart_last(page, "#lag-chart", "total lag") == expected)[1], timeout_s=SAMPLE_WAIT_S, what=f"lag {expected} drawn")
        assert chart_last(page, "#lag-chart", f"{topic}-0") == 100
        assert int(chart.get_attribute("data-points")) >= 3
        assert chart.locator("canvas").count() >= 1
        page.reload()
        assert page.locator('#offsets tr[data-tp$="-0"] .lag').inner_text() == "100"
        assert page.locator("#total-lag").inner_text() == "100"
        screenshot(page, target, "group")
        page.goto("/groups")
        assert page.locator(f'#groups tr[data-group="{group}"] .lag').inner_text() == "100"  # the total
        screenshot(page, target, "groups")
    finally:
        consumer.close()

    # an empty group's offsets reset from the console, then the group deleted
    page.goto(f"/groups/{group}")
    wait_for(lambda: (page.reload(), page.locator("#group-state").inner_text() == "Empty")[1], timeout_s=30, what="the group empty")
    page.select_option("#reset-offsets select[name=scenario]", "latest")
    page.click("#reset-offsets button")
    assert flash(page) == f"Reset 1 partitions of {group}."
    assert page.locator("#offsets .lag").first.inner_text() == "0"
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#delete-group button")
    assert flash(page) == f"Deleted group {group}."
    assert page.locator(f'#groups tr[data-group="{group}"]').count() == 0


def test_live_charts_draw_the_brokers_figures(page, target: Target) -> None:
    topic = unique("charted", target)
    producer = Producer({"bootstrap.servers": target.bootstrap})
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": unique("charts-reader", target), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    produced = 0
    page.goto("/charts")
    chart = "#chart-topic_bytes_in" if target.name == "odradek" else "#chart-topic_records"

    def feed() -> None:
        nonlocal produced
        for _ in range(50):
            producer.produce(topic, value=b"z" * 1000)
        producer.flush(15)
        produced += 50
        while consumer.poll(0.1) is not None:  # bytes out
            pass

    def busy(selector: str, label: str) -> bool:
        feed()
        return (chart_last(page, selector, label) or 0) > 0

    try:
        wait_for(lambda: busy(chart, topic), timeout_s=SAMPLE_WAIT_S * 2, what="a rate above zero")
        if target.name == "odradek":
            assert "Prometheus endpoint" in page.locator("#charts-source").inner_text()
            leader = f"broker {target.admin().list_topics(topic, timeout=10).topics[topic].partitions[0].leader}"  # takes the bytes in and out
            for name, label in (("broker_requests", "broker 1"), ("broker_bytes_in", leader), ("broker_bytes_out", leader), ("topic_bytes_out", topic)):
                assert page.locator(f"#chart-{name} canvas").count() == 1
                wait_for(lambda: busy(f"#chart-{name}", label), timeout_s=SAMPLE_WAIT_S, what=f"{label} in {name} above zero")
        else:
            assert "JMX" in page.locator("#charts-source").inner_text()
            for node_id in target.admin().list_topics(timeout=10).brokers:  # bytes in, as the log dirs grow
                wait_for(lambda: busy("#chart-broker_disk_growth", f"broker {node_id}"), timeout_s=SAMPLE_WAIT_S, what=f"broker {node_id}'s log dirs growing")  # noqa: B023 -- called at once
        screenshot(page, target, "charts")

        # the topics' list: records (log end offsets), size on disk, the produce rate while records come in
        def listed() -> bool:
            feed()
            page.goto("/topics")
            row = page.locator(f'#topics tr[data-topic="{topic}"]')
            rate = re.fullmatch(r"([\d,.]+)/s records", row.locator(".rate").inner_text())
            return row.locator(".records").inner_text() == f"{produced:,}" and rate is not None and float(rate.group(1).replace(",", "")) > 0

        wait_for(listed, timeout_s=SAMPLE_WAIT_S, what="the topic's records and produce rate listed")
        size = page.locator(f'#topics tr[data-topic="{topic}"] .size').inner_text()
        assert re.fullmatch(r"[\d.]+ (KiB|MiB)", size), size  # hundreds of records of 1000 bytes, on disk
        screenshot(page, target, "topics")
    finally:
        consumer.close()


# -- security ----------------------------------------------------------------------------------------------------


def _status(url: str, form: bytes | None = None, headers: dict[str, str] | None = None) -> int:
    """The HTTP status of a GET of ``url``, or of a POST of ``form`` to it."""
    headers = dict(headers or {})
    if form is not None:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    request = urllib.request.Request(url, data=form, headers=headers, method="GET" if form is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _group_past_one_record(bootstrap: str, topic: str, group: str) -> None:
    """``topic`` with one record in partition 0, and ``group`` (no members) having committed offset 1."""
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b"v", partition=0)
    producer.flush(15)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()


def test_every_change_needs_a_post_with_the_csrf_token(browser, odradek_cluster: tuple[str, str]) -> None:
    """Every form that changes something, found on the pages themselves: without the token, or with it from
    another site, or as a GET, it is refused and nothing changes. One console checks it: both modes run the
    same code."""
    bootstrap, url = odradek_cluster
    topic, group = f"guarded-{time.monotonic_ns() % 10**9}", f"guarded-group-{time.monotonic_ns() % 10**9}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    _group_past_one_record(bootstrap, topic, group)
    wait_for(lambda: _status(f"{url}/topics/{topic}") == 200, timeout_s=15, what="the topic known to the console's broker")
    actions: set[str] = set()
    with browser_tab(browser, url) as tab:
        for path in ("/", "/topics", f"/topics/{topic}", f"/topics/{topic}/messages", "/groups", f"/groups/{group}", "/charts"):
            assert tab.goto(path).status == 200, path
            actions |= set(tab.locator("form").evaluate_all("forms => forms.filter(f => f.method === 'post').map(f => f.getAttribute('action'))"))
            assert tab.locator("form").evaluate_all("forms => forms.filter(f => f.method !== 'post').map(f => f.id)") in ([], ["browse-form"])
    changes = {"/topics", f"/topics/{topic}/delete", f"/topics/{topic}/partitions", f"/topics/{topic}/configs", f"/topics/{topic}/messages", f"/groups/{group}/reset", f"/groups/{group}/delete"}
    assert actions == changes  # create, delete, add partitions, change a config, produce, reset offsets, delete a group
    fields = f"name={topic}-forged&count=5&key=retention.ms&value=1&scenario=earliest&partitions=1"
    for action in sorted(changes):
        assert _status(url + action, fields.encode()) == 403, action
        assert _status(url + action, f"{fields}&csrf=abc".encode(), {"Cookie": "odradek_console_csrf=abc", "Origin": "http://evil.example"}) == 403, action
        if action not in ("/topics", f"/topics/{topic}/messages"):  # those two are pages too
            assert _status(url + action) == 405, action
    metadata = admin.list_topics(timeout=10)
    assert f"{topic}-forged" not in metadata.topics and len(metadata.topics[topic].partitions) == 1
    configs = admin.describe_configs([ConfigResource("topic", topic)])
    assert next(iter(configs.values())).result(10)["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    low, high = Consumer({"bootstrap.servers": bootstrap, "group.id": group}).get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (low, high) == (0, 1)
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert [tp.offset for tp in committed.topic_partitions] == [1]
    with urllib.request.urlopen(f"{url}/topics", timeout=10) as response:
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Frame-Options"] == "DENY"


def test_names_from_the_cluster_are_shown_as_text_never_run(browser, odradek_cluster: tuple[str, str]) -> None:
    """A group id is any string a client chooses: one that is markup and script shows as itself."""
    bootstrap, url = odradek_cluster
    group = f"<img src=x onerror=alert(1)>'\");alert(2);//{time.monotonic_ns() % 10**6}"
    topic = f"named-{time.monotonic_ns() % 10**9}"
    _group_past_one_record(bootstrap, topic, group)
    with browser_tab(browser, url) as tab:
        dialogs: list[str] = []
        tab.on("dialog", lambda d: (dialogs.append(d.message), d.accept() if d.message.startswith("Delete group") else d.dismiss()))
        tab.goto("/groups")
        link = tab.locator("#groups a", has_text=group)
        assert link.inner_text() == group
        link.click()
        assert tab.locator("#group-id").inner_text() == group
        tab.click("#delete-group button")
        assert tab.locator(".flash").first.inner_text() == f"Deleted group {group}."
        assert dialogs == [f"Delete group {group}?"]  # the confirmation, and no script of the name's


def test_console_off_loopback_needs_authentication(tmp_path: Path) -> None:
    result = sp.run(
        [sys.executable, "-m", "odradek", "serve", "--override", f"log.dirs={tmp_path}", "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "console.listener=http://0.0.0.0:0"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1
    assert "console.listener 0.0.0.0 is not a loopback address: set console.basic.auth.user" in result.stdout + result.stderr


def test_the_console_binds_loopback_by_default(tmp_path: Path) -> None:
    """No --listener: port 9644 of 127.0.0.1 only, and no authentication asked."""
    with console_process(tmp_path / "console.log", "--bootstrap-server", "127.0.0.1:1") as (proc, url):
        assert url == "http://127.0.0.1:9644"
        listening = sp.run(["ss", "-Hltnp", "sport = :9644"], capture_output=True, text=True, check=True).stdout
        assert [line.split()[3] for line in listening.splitlines() if f"pid={proc.pid}," in line] == ["127.0.0.1:9644"]
        assert _status("http://127.0.0.1:9644/static/console.css") == 200


def test_basic_auth_and_bearer_token(tmp_path: Path) -> None:
    props = tmp_path / "console.properties"
    props.write_text("console.listener=http://127.0.0.1:0\nconsole.basic.auth.user=admin\nconsole.basic.auth.password=s3cret\nconsole.bearer.token=tok3n\n")
    with console_process(tmp_path / "console.log", "--bootstrap-server", "127.0.0.1:1", "--config", str(props)) as (_, url):
        basic = lambda user, password: {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}  # noqa: E731
        assert _status(f"{url}/static/console.css", headers={}) == 401
        assert _status(f"{url}/static/console.css", headers=basic("admin", "wrong")) == 401
        assert _status(f"{url}/static/console.css", headers=basic("admin", "s3cret")) == 200
        assert _status(f"{url}/static/console.css", headers={"Authorization": "Bearer tok3n"}) == 200
        assert _status(f"{url}/static/console.css", headers={"Authorization": "Bearer nope"}) == 401


def test_serve_imports_nothing_of_the_console_unless_asked(tmp_path: Path) -> None:
    """Start-up stays light: without console.listener no console module, aiohttp or jinja2 is loaded."""
    code = (
        "import sys\nfrom odradek import Broker\n"
        "with Broker(log_dir=sys.argv[1]):\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'jinja2') or m.startswith('odradek.tools')))"
    )
    result = sp.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


SASL_USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def test_the_console_shows_only_what_its_principal_may_see(browser, tmp_path: Path) -> None:
    """A broker with SASL and ACLs whose console logs in as alice (console.client.config): alice may describe
    and read one topic, nothing else."""
    port = kafka_jvm.free_port()
    users = " ".join(f'user_{u}="{p}"' for u, p in SASL_USERS.items())
    client_config = tmp_path / "console-client.properties"
    client_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";\n'
    )
    config = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" {users};',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.replication.factor": "1",
        "console.listener": "http://127.0.0.1:0",
        "console.client.config": str(client_config),
    }
    admin_config = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"}
    with Broker(log_dir=tmp_path / "broker", subprocess=True, config=config) as broker:
        url = _console_address(lambda: list(broker.output))
        admin = AdminClient(admin_config)
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("alice-may", "alice-may-not")]).values():
            f.result(10)
        grants = [AclBinding(ResourceType.TOPIC, "alice-may", ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW) for op in (AclOperation.DESCRIBE, AclOperation.READ)]
        for f in admin.create_acls(grants).values():
            f.result(10)
        producer = Producer(admin_config)
        producer.produce("alice-may", key=b"k", value=b"for alice's eyes")
        producer.produce("alice-may-not", key=b"k", value=b"not for alice")
        producer.flush(15)
        # the broker's own console, and odradek console --command-config: the same view
        with console_process(tmp_path / "console.log", "--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(client_config), "--listener", "http://127.0.0.1:0") as (_, separate):
            for console in (url, separate):
                with browser_tab(browser, console) as tab:
                    tab.goto("/topics")
                    assert tab.locator('#topics tr[data-topic="alice-may"]').count() == 1
                    assert tab.locator('#topics tr[data-topic="alice-may-not"]').count() == 0
                    # what alice may not describe (the brokers' log dirs and configs) is left out, saying why
                    assert "Cluster authorization failed" in tab.locator(".notes").inner_text()
                    tab.goto("/topics/alice-may/messages")
                    assert tab.locator("#messages .value").first.inner_text() == "for alice's eyes"
                    tab.goto("/")
                    assert tab.locator("#brokers tbody tr").count() == 1
                try:
                    with urllib.request.urlopen(f"{console}/topics/alice-may-not/messages", timeout=10):
                        raise AssertionError("alice read a topic she may not")
                except urllib.error.HTTPError as exc:
                    assert exc.code == 502 and "not for alice" not in exc.read().decode()


def test_without_the_console_extra_serve_and_console_name_it(tmp_path: Path) -> None:
    """aiohttp hidden from the import system, as on a machine without the ``console`` extra."""
    hide = "import sys; sys.modules['aiohttp'] = None; from odradek.cli import main; sys.exit(main(sys.argv[1:]))"
    serve = ["serve", "--override", f"log.dirs={tmp_path}", "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "console.listener=http://127.0.0.1:0"]
    for args in (serve, ["console", "--bootstrap-server", "127.0.0.1:1"]):
        result = sp.run([sys.executable, "-c", hide, *args], capture_output=True, text=True, timeout=60)
        assert result.returncode == 1
        assert "the web console needs aiohttp: pip install 'odradek[console]'" in result.stdout + result.stderr
