"""odradek's ZooKeeper session against a real ZooKeeper: the start-up paths, the cluster id, the broker's
ephemeral registration (again after its session expires), the controller election with its epoch, and
producer-id blocks handed out once each to competing brokers. Each test works under a chroot of its own."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Callable, Iterator

import kafka_jvm
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from odradek.controller import zk_data as zd
from odradek.controller.zk_client import ControllerMovedError, InconsistentClusterIdError, ZkClient, verify_meta_cluster_id


@pytest.fixture
def open_client(zookeeper: kafka_jvm.ZooKeeper) -> Iterator[Callable[..., ZkClient]]:
    """``open_client()`` opens a ZkClient under this test's own chroot; all are closed afterwards."""
    chroot = f"/odradek-{uuid.uuid4().hex[:8]}"
    opened: list[ZkClient] = []

    def open_client(**kw: object) -> ZkClient:
        client = ZkClient(zookeeper.connect + chroot, **kw)
        opened.append(client)
        return client

    open_client.chroot = chroot  # type: ignore[attr-defined]
    yield open_client
    for client in opened:
        client.close()


def registration(broker_id: int, port: int = 9092) -> zd.BrokerRegistration:
    return zd.BrokerRegistration(broker_id, (zd.EndPoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT"),))


def test_startup_makes_the_chroot_kafkas_paths_and_the_cluster_id(open_client: Callable[..., ZkClient], zookeeper: kafka_jvm.ZooKeeper) -> None:
    client = open_client()
    client.create_top_level_paths()
    assert all(client.kazoo.get(p)[0] is None for p in zd.PERSISTENT_PATHS)
    assert client.create_or_get_cluster_id("aaaaaaaaaaaaaaaaaaaaaa") == "aaaaaaaaaaaaaaaaaaaaaa"
    # a second broker takes the id there, whatever it proposed
    assert open_client().create_or_get_cluster_id("bbbbbbbbbbbbbbbbbbbbbb") == "aaaaaaaaaaaaaaaaaaaaaa"
    verify_meta_cluster_id("/data/meta.properties", "aaaaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaa")
    verify_meta_cluster_id("/data/meta.properties", None, "aaaaaaaaaaaaaaaaaaaaaa")  # a new log directory
    with pytest.raises(InconsistentClusterIdError) as refused:
        verify_meta_cluster_id("/data/meta.properties", "cccccccccccccccccccccc", "aaaaaaaaaaaaaaaaaaaaaa")
    assert str(refused.value) == "Invalid cluster.id in: /data/meta.properties. Expected aaaaaaaaaaaaaaaaaaaaaa, but read cccccccccccccccccccccc"
    root = KazooClient(hosts=zookeeper.connect)
    root.start(timeout=15)
    try:
        assert root.get(open_client.chroot)[0] is None  # type: ignore[attr-defined]
        assert root.get(open_client.chroot + zd.CLUSTER_ID)[0] == b'{"version":"1","id":"aaaaaaaaaaaaaaaaaaaaaa"}'  # type: ignore[attr-defined]
    finally:
        root.stop()
        root.close()


def test_a_registration_is_ephemeral_exclusive_and_renewed_after_session_expiry(open_client: Callable[..., ZkClient], zookeeper: kafka_jvm.ZooKeeper) -> None:
    broker = open_client(session_timeout_s=6.0)
    broker.create_top_level_paths()
    epochs: list[int] = []
    first_epoch = broker.keep_registered(registration(1), epochs.append)
    data, stat = broker.kazoo.get(zd.broker_path(1))
    assert zd.BrokerRegistration.decode(1, data).endpoints == registration(1).endpoints
    assert (stat.version, stat.ephemeralOwner, stat.czxid) == (1, broker.session_id, first_epoch)
    assert broker.register_broker(registration(1)) == first_epoch  # its own znode: fine
    other = open_client()
    with pytest.raises(NodeExistsError):
        other.register_broker(registration(1))

    # Expire the broker's session the way ZooKeeper does it: another connection with its id and password closes.
    session_id, password = broker.kazoo.client_id
    thief = KazooClient(hosts=zookeeper.connect + open_client.chroot, client_id=(session_id, password))  # type: ignore[attr-defined]
    thief.start(timeout=15)
    thief.stop()
    thief.close()
    deadline = time.monotonic() + 30
    while len(epochs) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(epochs) == 2 and epochs[1] > first_epoch
    data, stat = other.kazoo.get(zd.broker_path(1))
    assert stat.ephemeralOwner == broker.session_id != session_id
    assert zd.BrokerRegistration.decode(1, data).endpoints == registration(1).endpoints


def test_one_broker_wins_the_election_and_the_next_bumps_the_epoch(open_client: Callable[..., ZkClient]) -> None:
    a, b = open_client(), open_client()
    assert a.register_controller_and_increment_epoch(1) == (1, 1)
    with pytest.raises(ControllerMovedError):
        b.register_controller_and_increment_epoch(2)
    assert (b.controller_id(), b.controller_epoch()) == (1, (1, 1))
    data, stat = b.kazoo.get(zd.CONTROLLER)
    assert stat.ephemeralOwner == a.session_id
    assert data.startswith(b'{"version":2,"brokerid":1,"timestamp":"') and data.endswith(b'","kraftControllerEpoch":-1}')
    a.close()  # the controller's session ends: /controller goes with it
    assert b.register_controller_and_increment_epoch(2) == (2, 2)
    assert b.kazoo.get(zd.CONTROLLER_EPOCH)[0] == b"2"


def test_producer_id_blocks_are_handed_out_once_across_brokers(open_client: Callable[..., ZkClient]) -> None:
    clients = [open_client() for _ in range(3)]
    clients[0].create_top_level_paths()  # the znode exists empty, as Kafka leaves it
    blocks: list[zd.ProducerIdBlock] = []

    def allocate(client: ZkClient, broker_id: int) -> None:
        for _ in range(10):
            blocks.append(client.new_producer_id_block(broker_id))

    threads = [threading.Thread(target=allocate, args=(c, i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(b.first for b in blocks) == list(range(0, 30_000, 1000))
    assert all(b.size == 1000 for b in blocks)
    latest = zd.ProducerIdBlock.decode(clients[0].kazoo.get(zd.LATEST_PRODUCER_ID_BLOCK)[0])
    assert (latest.first, latest.last) == (29_000, 29_999)
