"""The JVM's hash codes, wherever Kafka lets one show: which coordinator partition owns a group or a
transactional id (``Utils.abs(id.hashCode) % partitions``), and the iteration order of the Java and Scala
hash maps whose contents Kafka writes out (its tools' reports, the JSON of its znodes). And the JVM's
arithmetic where Kafka's results depend on it: sums that overflow, doubles cast to whole numbers, division
by zero (a quota of 0 or NaN).

One definition each, so that every place that must agree with a Kafka broker computes the same number.
"""

from __future__ import annotations

import math
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


def java_whole(value: float, bits: int = 64) -> int:
    """A double cast to a Java ``long`` (or with ``bits`` 32, an ``int``), as Scala's ``toLong``/``toInt``:
    NaN is 0, values beyond the type saturate, the rest are truncated toward zero."""
    if value != value:
        return 0
    high = (1 << (bits - 1)) - 1
    if value >= high:
        return high
    if value <= -high - 1:
        return -high - 1
    return int(value)


def java_round(value: float) -> int:
    """Java's ``Math.round(double)``: the nearest long, halves up; NaN is 0 and infinities saturate."""
    if not math.isfinite(value) or abs(value) >= 2**52:  # no fraction left to round
        return java_whole(value)
    return java_whole(math.floor(value + 0.5))


def java_divide(dividend: float, divisor: float) -> float:
    """Java's double division: by zero an infinity of the quotient's sign (NaN for 0/0 or NaN), not an error."""
    if divisor == 0:
        if dividend == 0 or dividend != dividend:
            return math.nan
        return math.copysign(math.inf, dividend) * math.copysign(1.0, divisor)
    return dividend / divisor


def java_min(a: float, b: float) -> float:
    """Java's ``Math.min(double, double)``: NaN if either is NaN (Python's ``min`` keeps whichever comes first)."""
    if a != a or b != b:
        return math.nan
    return min(a, b)


def java_double_string(value: float) -> str:
    """How Kafka writes a double into a config (``Double.toString``), where it differs in what a JVM can read
    back: NaN and the infinities (Python's ``repr`` of the others parses in Java as in Python)."""
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(float(value))


def java_long_hash(value: int) -> int:
    """``Long.hashCode`` as its 32 bits (unsigned): the long's high half xor-ed into its low half."""
    return (value ^ (value >> 32)) & 0xFFFFFFFF


def hash_map_spread(hash_code: int) -> int:
    """``HashMap.hash``: a key's hash code with its high 16 bits xor-ed into its low ones, as 32 unsigned
    bits; a ``HashMap`` or ``ConcurrentHashMap`` of capacity ``n`` keeps the key in bucket ``spread & (n - 1)``."""
    h = hash_code & 0xFFFFFFFF
    return h ^ (h >> 16)


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
