"""A partition's name, ``(topic, partition index)`` (Kafka's ``org.apache.kafka.common.TopicPartition``).

Defined here, in the lowest layer that names partitions (the log manager keys its logs by it), so that
storage, the controller, the broker and the tools all mean the same thing by it.
"""

TopicPartition = tuple[str, int]
