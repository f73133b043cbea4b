"""The JVM hash codes Kafka's placement and output orders depend on, against values Java computes."""

from odradek.protocol.java_hash import int32, java_string_hash, kafka_abs, topic_partition_hash


def test_string_hash_code_over_utf16_code_units() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two code units
    assert java_string_hash("\ud800") == 0xD800  # a lone surrogate hashes as Java keeps it


def test_utils_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == kafka_abs(5) == 5


def test_topic_partition_hash_code() -> None:
    # new TopicPartition("hello", 3).hashCode() == 31 * (31 + 3) + "hello".hashCode()
    assert topic_partition_hash("hello", 3) == 99162322 + 31 * 34
    assert topic_partition_hash("polygenelubricants", 0) == int32(31 * 31 - (1 << 31))


def test_int32_wraps_as_java_int_arithmetic() -> None:
    assert int32(2**31) == -(2**31)
    assert int32(2**32 + 7) == 7
    assert int32(-1) == -1
