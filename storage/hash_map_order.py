"""The iteration order of a Java ``HashMap<Long, V>``, for the places where Kafka shows a user one.

Kafka's ProducerStateManager keeps a partition's producers in a ``java.util.HashMap`` keyed by producer
id, and DescribeProducers (``kafka-transactions describe-producers``) lists them as that map iterates: by
bucket, and within a bucket in the order the ids went in. The bucket is the key's spread hash modulo the
table's capacity, and the capacity only grows: it starts at 16, doubles when the map holds more than
three quarters of it, and also doubles when a bucket of a table smaller than 64 would take a 9th entry
(JDK 17's ``HashMap.putVal``/``treeifyBin``); removing entries or clearing the map never shrinks it. So
the order depends on the map's history, which this model follows key by key.

One case is not modelled: a bucket of 9 or more entries in a table of 64 or more, which Java turns into a
red-black tree whose iteration order follows the tree's shape rather than insertion (compat-tests/README.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TypeVar

from odradek.protocol.java_hash import hash_map_spread, java_long_hash

INITIAL_CAPACITY = 16
LOAD_FACTOR = 0.75
TREEIFY_THRESHOLD = 8
MIN_TREEIFY_CAPACITY = 64

V = TypeVar("V")


class HashMapOrder:
    """The table capacity and bucket sizes of a Java ``HashMap`` given the same puts and removes."""

    def __init__(self) -> None:
        self.capacity = 0
        """0 until the first put, as Java allocates the table lazily."""
        self._bucket_sizes: Counter[int] = Counter()
        self._size = 0

    def bucket(self, key: int) -> int:
        return hash_map_spread(java_long_hash(key)) & (self.capacity - 1)

    def put(self, key: int, keys: Iterable[int]) -> None:
        """A new ``key`` went in; ``keys`` are all the map's keys after it (to re-bucket on a resize)."""
        if self.capacity == 0:
            self.capacity = INITIAL_CAPACITY
        bucket = self.bucket(key)
        grow = self._bucket_sizes[bucket] >= TREEIFY_THRESHOLD and self.capacity < MIN_TREEIFY_CAPACITY
        self._bucket_sizes[bucket] += 1
        self._size += 1
        if grow:
            self.capacity *= 2
        if self._size > self.capacity * LOAD_FACTOR:
            self.capacity *= 2
            grow = True
        if grow:
            self._bucket_sizes = Counter(self.bucket(k) for k in keys)

    def remove(self, key: int) -> None:
        self._bucket_sizes[self.bucket(key)] -= 1
        self._size -= 1

    def clear(self) -> None:
        self._bucket_sizes.clear()
        self._size = 0

    def iteration_order(self, items: Iterable[tuple[int, V]]) -> list[tuple[int, V]]:
        """``items`` (in the order their keys went in, as a dict keeps them) in Java's iteration order."""
        return sorted(items, key=lambda item: self.bucket(item[0])) if self.capacity else list(items)
