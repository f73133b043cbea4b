"""The model of a Java ``HashMap<Long, V>``'s iteration order (the order Kafka's DescribeProducers lists a
partition's producers in) against Java 17's own HashMap, replaying the same puts, removes and clears."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from odradek.storage.hash_map_order import HashMapOrder

PROBE = Path(__file__).parent / "java" / "HashMapOrderProbe.java"


@pytest.fixture(scope="module")
def probe_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The probe compiled once: ``java HashMapOrderProbe.java`` would compile it again at every launch (~1 s of
    CPU where the compiled probe runs in a tenth of that)."""
    javac = shutil.which("javac")
    assert javac is not None, "no `javac` on PATH: install a Java 17 JDK (make test does)"
    classes = tmp_path_factory.mktemp("hash-map-order-probe")
    done = subprocess.run([javac, "-d", str(classes), str(PROBE)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return classes


def java_orders(classes: Path, ops: list[str]) -> list[list[int]]:
    java = shutil.which("java")
    assert java is not None, "no `java` on PATH: install a Java 17 JDK (make test does)"
    done = subprocess.run([java, "-cp", str(classes), PROBE.stem], input="\n".join(ops) + "\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [[int(key) for key in line.split()] for line in done.stdout.splitlines()]


def model_orders(ops: list[str]) -> list[list[int]]:
    """The same operations on a dict (insertion order) with a HashMapOrder beside it, as the producer
    state keeps them."""
    keys: dict[int, None] = {}
    order = HashMapOrder()
    orders = []
    for op in ops:
        verb, _, arg = op.partition(" ")
        if verb == "put" and int(arg) not in keys:
            keys[int(arg)] = None
            order.put(int(arg), keys)
        elif verb == "remove" and int(arg) in keys:
            del keys[int(arg)]
            order.remove(int(arg))
        elif verb == "clear":
            keys.clear()
            order.clear()
        elif verb == "order":
            orders.append([key for key, _ in order.iteration_order(keys.items())])
    return orders


def puts(*keys: int) -> list[str]:
    return [f"put {key}" for key in keys]


def random_ops(seed: int, count: int, id_range: int) -> list[str]:
    rng = random.Random(seed)
    ops = []
    for _ in range(count):
        roll = rng.random()
        verb = "put" if roll < 0.6 else "remove" if roll < 0.995 else "clear"
        ops += [verb if verb == "clear" else f"{verb} {rng.randrange(id_range)}", "order"]
    return ops


SCENARIOS = {
    "two ids either side of a multiple of 16 (the later id first)": puts(15, 16) + ["order"],
    "ids 0 to 40, the table growing at 13 and 25": [op for key in range(41) for op in (f"put {key}", "order")],
    "ids past 2**32, their high half folded in": puts(2**32 + 5, 5, 2**40 + 1, 2**62 + 3, 2**63 - 1, 65_536, 65_537) + ["order"],
    "a 9th id in one bucket of a small table doubles it": [op for key in range(0, 16 * 12, 16) for op in (f"put {key}", "order")],
    "a removed id put again goes last in its bucket": puts(1, 17, 33) + ["remove 1", "put 1", "order"],
    "clear keeps the grown table": puts(*range(13)) + ["clear"] + puts(17, 1) + ["order"],
    "random puts, removes and clears": random_ops(seed=21, count=3000, id_range=4000),
}


@pytest.mark.parametrize("ops", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_the_model_iterates_as_javas_hash_map(ops: list[str], probe_classes: Path) -> None:
    assert model_orders(ops) == java_orders(probe_classes, ops)
