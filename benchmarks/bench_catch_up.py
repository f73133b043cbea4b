"""Catch-up rate of odradek's replica fetcher: a follower starting empty, ``--mb`` behind a real Kafka 3.9.1
leader.

    python benchmarks/bench_catch_up.py --mb 256

ZooKeeper and a Kafka broker (id 1) from the jars of tests/jvm; odradek registers as broker 2 in its
ZooKeeper (nothing of odradek serves: only the fetcher runs, in this process, as in
tests/broker/test_replica_fetcher.py). A topic of one partition on replicas [1, 2] gets ``--mb`` MB of
1 KiB records (acks=1, uncompressed, linger 20 ms), then the fetcher (Kafka's defaults: 1 MiB per partition,
500 ms wait) replicates it into an empty log. Reported: MB/s from the first fetch to the log end matching
Kafka's, and this process's CPU seconds per GB.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "jvm"))

import kafka_jvm  # noqa: E402

from odradek.broker.network.kafka_client import KafkaClient, Node  # noqa: E402
from odradek.broker.replication.replica_fetcher import FetcherConfig, InitialFetchState, ReplicaFetcherManager, initial_fetch_offset  # noqa: E402
from odradek.controller import zk_data as zd  # noqa: E402
from odradek.controller.zk_client import ZkClient  # noqa: E402
from odradek.storage.log import Log  # noqa: E402
from odradek.storage.log_config import LogConfig  # noqa: E402

TOPIC = "bench-catch-up"


def fill(bootstrap: str, megabytes: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1 << 20, "log_level": 0})
    value = b"x" * 1024
    failures: list = []
    for i in range(megabytes * 1024):
        while True:
            try:
                producer.produce(TOPIC, value, on_delivery=lambda err, msg: failures.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0 and not failures, failures[:1]


async def follow(bootstrap: str, local: Log, leader_end: int) -> float:
    host, port = bootstrap.split(":")
    async with KafkaClient(bootstrap) as client:
        topic_id = (await client.refresh_metadata([TOPIC])).topics[0].topic_id
    async with anyio.create_task_group() as tg:
        manager = ReplicaFetcherManager(FetcherConfig(broker_id=2), 1, {(TOPIC, 0): local}.__getitem__, tg)
        started = time.monotonic()
        manager.add_fetcher_for_partitions({(TOPIC, 0): InitialFetchState(topic_id, Node(1, host, int(port)), 0, initial_fetch_offset(local))})
        while local.log_end_offset < leader_end:
            await anyio.sleep(0.01)
        took = time.monotonic() - started
        manager.close_all()
        tg.cancel_scope.cancel()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        zookeeper = kafka_jvm.ZooKeeper(Path(root) / "zookeeper").start()
        kafka = kafka_jvm.KafkaBroker(Path(root) / "kafka", zookeeper.connect, broker_id=1)
        zk = None
        try:
            kafka.start()
            zk = ZkClient(zookeeper.connect)
            zk.register_broker(zd.BrokerRegistration(2, (zd.EndPoint("PLAINTEXT", "127.0.0.1", kafka_jvm.free_port(), "PLAINTEXT"),)))
            admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
            admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2]])])[TOPIC].result(30)
            fill(kafka.bootstrap, args.mb)
            leader_end = args.mb * 1024  # Kafka's log end offset (its high watermark waits for broker 2)
            local = Log.open(Path(root) / "follower" / f"{TOPIC}-0", LogConfig())
            cpu = time.process_time()
            took = anyio.run(follow, kafka.bootstrap, local, leader_end)
            cpu = time.process_time() - cpu
            size = local.size_in_bytes
            local.close()
            print(f"caught up {size / 1e6:.0f} MB ({leader_end} records) in {took:.2f} s: {size / 1e6 / took:.0f} MB/s, {cpu / (size / 1e9):.2f} CPU s/GB in the follower's process")
        finally:
            if zk is not None:
                zk.close()
            kafka.stop()
            zookeeper.stop()


if __name__ == "__main__":
    main()
