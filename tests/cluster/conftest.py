"""The cluster tests' shared pieces: the harness and checker modules importable by name, and one cluster of
each broker kind per test module.

``BROKER_KINDS`` lists the implementations every cluster test runs against: real Kafka, and odradek in
ZooKeeper mode with replication; every test of this directory runs against both unchanged.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import harness  # noqa: E402

BROKER_KINDS = ("kafka", "odradek")


@pytest.fixture(scope="module", params=BROKER_KINDS)
def broker_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def cluster(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Cluster]:
    """ZooKeeper and three brokers of ``broker_kind``, each in its network namespace; everything killed and
    removed after the module. A machine that cannot run it (not root, no ``ip``/``nft``, no jars) fails."""
    root = tmp_path_factory.mktemp(f"cluster-{broker_kind}")
    try:
        with harness.running_cluster(root, broker_kind) as cluster:
            yield cluster
    finally:
        shutil.rmtree(root, ignore_errors=True)
