"""Feature levels in a ZooKeeper cluster of odradek brokers only: each registers the levels it supports in
``/brokers/ids/<id>`` and finalizes in ApiVersions what every registered broker supports, here the feature
table's levels (``transaction.version`` 2, ``group.version`` 1, ``share.version`` 2), as a single node does. A cluster with a Kafka
3.9 broker finalizes neither: tests/cluster/test_mixed_cluster.py."""

from __future__ import annotations

import shutil
from typing import Iterator

import pytest
from harness import Cluster, running_cluster

from odradek.broker.features import FEATURES, registered_features
from odradek.controller import zk_data as zd


@pytest.fixture(scope="module")
def odradek_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("finalized-features")
    try:
        with running_cluster(root, "odradek", size=2) as cluster:
            yield cluster
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_odradek_only_cluster_finalizes_what_all_its_brokers_register(odradek_cluster: Cluster) -> None:
    for broker_id in odradek_cluster.brokers:
        assert odradek_cluster.znode(zd.broker_path(broker_id))["features"] == registered_features()
        levels, epoch = odradek_cluster.finalized_features(broker_id)
        assert levels == {f.name: f.level for f in FEATURES if f.level} and levels["transaction.version"] == 2
        assert epoch >= 0
