"""Fixtures of the compatibility suite: the two targets, the three clients, and the comparison.

Every scenario test takes the ``compat`` fixture, so it runs once per target (odradek, kafka) and per
client (confluent-kafka, kafka-python, aiokafka). On odradek the observation must equal the scenario's
EXPECTED (Kafka 3.9's behaviour as documented); on Kafka it must equal both EXPECTED and what the same
scenario observes on odradek. The helper modules beside this file are imported by name: pytest runs with
``--import-mode=importlib`` and this folder has no ``__init__.py``, so it is put on ``sys.path`` here.
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "jvm"))

import kafka_jvm  # noqa: E402

from compat_client import Client  # noqa: E402
from compat_clients import CLIENTS  # noqa: E402
from compat_observe import NotOffered, canonical  # noqa: E402
from compat_targets import Target  # noqa: E402

Scenario = Callable[[Target, Client], dict]


@pytest.fixture(scope="session")
def odradek_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    from odradek import Broker

    with Broker(log_dir=tmp_path_factory.mktemp("compat-odradek"), config=kafka_jvm.BROKER_SETTINGS) as broker:
        yield Target("odradek", broker.bootstrap)


@pytest.fixture(scope="session")
def kafka_target() -> Target:
    """``ODRADEK_COMPAT_KAFKA`` or Kafka 3.9.1 from the jars in ZooKeeper mode, shared with tests/."""
    try:
        return Target("kafka", kafka_jvm.shared_kafka().bootstrap)
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def odradek_restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """An odradek of its own in a subprocess, for the scenarios that restart their broker."""
    from odradek import Broker

    broker = Broker(log_dir=tmp_path_factory.mktemp("compat-odradek-restart"), config=kafka_jvm.BROKER_SETTINGS, subprocess=True).start()
    try:
        yield Target("odradek", broker.bootstrap, restart=broker.restart)
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A Kafka broker of its own (broker.id 0, under the ZooKeeper chroot /restart-test of the shared
    ZooKeeper, or a ZooKeeper of its own when the shared Kafka came from ODRADEK_COMPAT_KAFKA), so that
    restarting it leaves the shared one untouched."""
    root = tmp_path_factory.mktemp("compat-kafka-restart")
    try:
        shared = kafka_jvm.shared_kafka()
        zookeeper = None if shared.zookeeper is not None else kafka_jvm.ZooKeeper(root / "zookeeper").start()
    except kafka_jvm.JvmUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    connect = (shared.zookeeper or zookeeper).connect + "/restart-test"
    broker = kafka_jvm.KafkaBroker(root / "kafka", connect)
    try:
        broker.start()

        def restart() -> None:
            broker.stop()
            broker.start()

        yield Target("kafka", broker.bootstrap, restart=restart)
    finally:
        broker.stop()
        if zookeeper is not None:
            zookeeper.stop()


@pytest.fixture(params=["odradek", "kafka"])
def target(request: pytest.FixtureRequest) -> Target:
    return request.getfixturevalue(f"{request.param}_target")


@pytest.fixture(params=list(CLIENTS))
def client_name(request: pytest.FixtureRequest) -> str:
    return request.param


def _diff(left: Any, right: Any, left_name: str, right_name: str) -> str:
    def lines(value: Any) -> list[str]:
        return json.dumps(value, indent=2, sort_keys=True).splitlines()

    return "\n".join(difflib.unified_diff(lines(left), lines(right), left_name, right_name, lineterm=""))


TARGET_PARAMS = ("target", "restart_compat")


def _scenario_key(node: pytest.Item) -> str:
    """The test and its parameters other than the target: the same scenario and client on either target."""
    params = {k: v for k, v in node.callspec.params.items() if k not in TARGET_PARAMS}  # type: ignore[attr-defined]
    return f"{node.path}::{node.originalname}{sorted((k, repr(v)) for k, v in params.items())}"  # type: ignore[attr-defined]


_ODRADEK_OBSERVATIONS: dict[str, dict] = {}
"""What each scenario observed on odradek in this session: its Kafka test compares with that instead of
running the scenario on odradek a second time (it does when the odradek test did not run first)."""


class Compat:
    def __init__(self, target: Target, client_name: str, odradek: Target, key: str) -> None:
        self.target = target
        self.client_name = client_name
        self.odradek = odradek
        self.key = key

    def observe(self, scenario: Scenario, target: Target) -> dict:
        client = CLIENTS[self.client_name](target.bootstrap)
        try:
            return canonical(scenario(target, client))
        except NotOffered as exc:
            pytest.skip(str(exc))
        finally:
            client.close()

    def on_odradek(self, scenario: Scenario) -> dict:
        if self.key not in _ODRADEK_OBSERVATIONS:
            _ODRADEK_OBSERVATIONS[self.key] = self.observe(scenario, self.odradek)
        return _ODRADEK_OBSERVATIONS[self.key]

    def check(self, scenario: Scenario, expected: dict) -> dict:
        """Run ``scenario`` on this test's target and compare; returns the observation."""
        expected = canonical(expected)
        if self.target.name == "odradek":
            seen = self.on_odradek(scenario)
        else:
            seen = self.observe(scenario, self.target)
            on_odradek = self.on_odradek(scenario)
            if seen != on_odradek:
                pytest.fail(f"{scenario.__name__} with {self.client_name}: odradek differs from Apache Kafka\n" + _diff(seen, on_odradek, "kafka", "odradek"), pytrace=False)
        if seen != expected:
            pytest.fail(f"{scenario.__name__} with {self.client_name} on {self.target.name}: not Kafka 3.9's behaviour\n" + _diff(expected, seen, "expected (Kafka 3.9)", self.target.name), pytrace=False)
        return seen


@pytest.fixture
def compat(request: pytest.FixtureRequest, target: Target, client_name: str, odradek_target: Target) -> Compat:
    return Compat(target, client_name, odradek_target, _scenario_key(request.node))


@pytest.fixture(params=["odradek", "kafka"])
def restart_compat(request: pytest.FixtureRequest, client_name: str) -> Compat:
    """``compat`` for scenarios that restart their broker (``target.restart()``): brokers of their own."""
    target = request.getfixturevalue(f"{request.param}_restartable")
    return Compat(target, client_name, request.getfixturevalue("odradek_restartable"), _scenario_key(request.node))
