"""The ZooKeeper-mode fixtures' common parts: odradek or Kafka brokers started on the session's ZooKeeper
under a chroot of the module's own, and a ZooKeeper session there.

Each module chooses its brokers' settings and directories; starting them, and killing those still running
whatever happened, is written once here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import kafka_jvm
from kazoo.client import KazooClient

from odradek import Broker


@contextlib.contextmanager
def odradek_brokers(
    zookeeper_connect: str, log_dir: Callable[[int], Path], settings: Mapping[str, Any], ids: Iterable[int] = range(3), per_broker: Mapping[int, Mapping[str, Any]] | None = None
) -> Iterator[dict[int, Broker]]:
    """odradek brokers ``ids``, each a subprocess on ``zookeeper_connect`` (with the chroot) with ``settings``
    (and its own of ``per_broker``) and its log in ``log_dir(id)``, each waited for as :func:`kafka_brokers` waits for Kafka's: until it
    answers Metadata with a broker in it; on the way out, those still in the dict are killed (one a test
    stopped and could not start again is down already).

    A broker serves from its start-up banner on, but knows the brokers and the controller only from the
    controller's first UpdateMetadata (as Kafka's): until then it answers Metadata with none, and an admin
    client that met that answer (librdkafka) waits for a controller without asking again."""
    started: dict[int, Broker] = {}
    first, *others = ids
    try:
        for group in ([first], others):  # the first alone: it is the controller, then the others beside each other
            for broker_id in group:
                config = {"zookeeper.connect": zookeeper_connect, "broker.id": broker_id, **settings, **(per_broker or {}).get(broker_id, {})}
                started[broker_id] = Broker(log_dir(broker_id), config=config, subprocess=True).start()
            for broker_id in group:
                kafka_jvm.wait_until_serving(started[broker_id].bootstrap, kafka_jvm.STARTUP_TIMEOUT_S)
        yield started
    finally:
        for broker in started.values():
            with contextlib.suppress(RuntimeError):
                broker.kill()


@contextlib.contextmanager
def kafka_brokers(
    zookeeper_connect: str, log_dir: Callable[[int], Path], settings: Mapping[str, str], ids: Iterable[int] = range(3), heap: str = "384m", per_broker: Mapping[int, Mapping[str, str]] | None = None
) -> Iterator[dict[int, kafka_jvm.KafkaBroker]]:
    """Kafka brokers ``ids`` on ``zookeeper_connect`` (with the chroot) with ``settings`` (and each its own of
    ``per_broker``), each with its log in ``log_dir(id)`` and a ``heap`` small enough for three beside the
    tests; all killed on the way out."""
    brokers = {b: kafka_jvm.KafkaBroker(log_dir(b), zookeeper_connect, b, {**settings, **(per_broker or {}).get(b, {})}) for b in ids}
    first, *others = brokers.values()
    try:
        first.start(heap=heap)  # alone: it is the controller, as odradek_brokers' first is
        for broker in others:  # then the others' JVMs start beside each other
            broker.launch(heap)
        for broker in others:
            broker.serving()
        yield brokers
    finally:
        for broker in brokers.values():
            broker.kill()


@contextlib.contextmanager
def zk_session(zookeeper_connect: str) -> Iterator[KazooClient]:
    """A ZooKeeper session on ``zookeeper_connect`` (with its chroot), closed on the way out."""
    client = KazooClient(hosts=zookeeper_connect)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@dataclass(frozen=True)
class ThreeBrokers:
    """A three-broker cluster under a failover test: its bootstrap list, a way to kill one broker by its id,
    and, for odradek's, the warnings and errors its brokers logged (for a failure's message)."""

    name: str
    bootstrap: str
    kill: Callable[[int], None]
    warnings: Callable[[], str] = lambda: ""


@contextlib.contextmanager
def three_brokers(kind: str, zookeeper_connect: str, root: Path, settings: Mapping[str, str]) -> Iterator[ThreeBrokers]:
    """Three odradek brokers in ZooKeeper mode on ``zookeeper_connect`` (with the chroot), or (``kafka44``) a
    three-node Kafka 4.4 KRaft cluster, each with ``settings``. odradek's internal topics get Kafka's three
    replicas, and a killed broker's ZooKeeper session ends after 6 s, so the controller moves its
    leaderships soon."""
    if kind == "odradek":
        odradek_settings = {**settings, "offsets.topic.replication.factor": "3", "zookeeper.session.timeout.ms": "6000"}
        with odradek_brokers(zookeeper_connect, lambda b: root / f"odradek-{b}", odradek_settings) as brokers:

            def warnings() -> str:
                logged = (f"broker {n}: {line}" for n, b in brokers.items() for line in list(b.output)[-400:] if " WARNING " in line or " ERROR " in line or "Traceback" in line)
                return "\n".join(logged)[-6000:]

            yield ThreeBrokers("odradek", ",".join(b.bootstrap for b in brokers.values()), lambda node: brokers[node].kill(), warnings)
    else:
        import kafka44_jvm

        with kafka44_jvm.KRaftCluster(root, settings={**kafka44_jvm.CLUSTER_SETTINGS, **settings}) as kraft:
            yield ThreeBrokers("kafka44", kraft.bootstrap, lambda node: kraft.node(node).kill())
