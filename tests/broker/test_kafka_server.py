"""What ``KafkaServer`` declares of its coordinators' building."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from odradek.broker import kafka_server
from odradek.broker.kafka_server import KafkaServer


@pytest.mark.parametrize(
    ("builder", "declared"),
    [
        (KafkaServer._group_coordinator, kafka_server.GROUP_COORDINATOR_MODULES),
        (KafkaServer._transaction_coordinator, kafka_server.TRANSACTION_COORDINATOR_MODULES),
        (KafkaServer._share_coordinator, kafka_server.SHARE_COORDINATOR_MODULES),
    ],
    ids=["group", "transaction", "share"],
)
def test_each_coordinators_modules_are_the_ones_its_building_imports(builder, declared: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    """FindCoordinator imports a coordinator's declared modules on a worker thread before the building
    (``Coordinators.prepare``): a module the building imports that the list misses would be compiled on the
    event loop again, holding every client."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(builder)))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == set(declared)
