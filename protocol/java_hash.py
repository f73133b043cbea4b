"""The JVM's hash codes, wherever Kafka lets one show: which coordinator partition owns a group or a
transactional id (``Utils.abs(id.hashCode) % partitions``), and the iteration order of the Java and Scala
hash maps whose contents Kafka writes out (its tools' reports, the JSON of its znodes).

One definition each, so that every place that must agree with a Kafka broker computes the same number.
"""

from __future__ import annotations

import struct

_UTF16_UNIT = struct.Struct(">H")


def int32(value: int) -> int:
    """``value`` wrapped to a Java ``int`` (32-bit two's complement), as Java's arithmetic overflows."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def int64(value: int) -> int:
    """``value`` wrapped to a Java ``long``, as Kafka's sums of timestamps and durations overflow (now +
    Long.MAX_VALUE is in the past)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``31 * h + unit`` over the string's UTF-16 code units."""
    h = 0
    for (unit,) in _UTF16_UNIT.iter_unpack(s.encode("utf-16-be", "surrogatepass")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return int32(h)


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs``, except that Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition.hashCode``: ``31 * (31 + partition) + topic.hashCode()``."""
    return int32(31 * (31 + partition) + java_string_hash(topic))
