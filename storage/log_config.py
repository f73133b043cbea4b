"""Topic-level configuration: one table of Kafka 3.9's topic config keys, and the typed ``LogConfig``.

Every key carries its ConfigDef type, default, validation, Kafka's documentation and the broker keys it
falls back to (its DescribeConfigs "synonyms", most specific first: ``retention.ms`` falls back to
``log.retention.ms``, then ``log.retention.minutes``, then ``log.retention.hours``). A topic's effective
value is its own override if set, else the first broker synonym set in ``server.properties``, else the
table default -- exactly the precedence DescribeConfigs reports with ``config_source``.

Bad values raise ``ConfigError`` with Kafka's wording; the broker answers INVALID_CONFIG.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from odradek.protocol.values import FrozenFields
from odradek.storage.config_types import ConfigError, ConfigKey, ConfigType, InvalidValueError

B, S, I, L, LIST, D = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.LIST,
    ConfigType.DOUBLE,
)
LONG_MAX = 2**63 - 1
MS_PER_MINUTE = 60_000
MS_PER_HOUR = 3_600_000

# DescribeConfigs ConfigSource values (DescribeConfigsResponse.json).
SOURCE_TOPIC = 1  # DYNAMIC_TOPIC_CONFIG
SOURCE_STATIC_BROKER = 4  # STATIC_BROKER_CONFIG
SOURCE_DEFAULT = 5  # DEFAULT_CONFIG


class BrokerSynonym(FrozenFields):
    """A ``server.properties`` key a topic key falls back to; ``scale`` converts its unit (hours -> ms)."""

    __slots__ = _FIELDS = ("name", "scale")
    name: str
    scale: int

    def __init__(self, name: str, scale: int = 1) -> None:
        self._set(name, scale)


class TopicConfigKey(ConfigKey):
    __slots__ = ("synonyms", "check", "attribute")

    def __init__(self, *key: Any, synonyms: tuple[BrokerSynonym, ...] = (), check: Callable[[Any], str | None] | None = None, **options: Any) -> None:
        """``key`` and ``options``: a :class:`ConfigKey`'s."""
        super().__init__(*key, **options)
        self.synonyms = synonyms
        self.check = check
        """Validation beyond ``at_least``/``valid``: returns Kafka's reason when the value is rejected."""
        self.attribute = self.name.replace(".", "_")
        """The ``LogConfig`` attribute holding this key's value (read by every ``LogConfig`` made: worked out once)."""

    def validate(self, value: Any) -> None:
        super().validate(value)
        if value is not None and self.check is not None:
            reason = self.check(value)
            if reason:
                raise InvalidValueError(f"Invalid value {value} for configuration {self.name}: {reason}")


def _between(lo: float, hi: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if lo <= value <= hi else f"Value must be in the range [{lo:g}, {hi:g}]"

    return check


def _between_or_minus_one(lo: int, hi: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value == -1 or lo <= value <= hi else f"Value must be between {lo} and {hi} or -1"

    return check


_THROTTLED_REPLICA = r"^[0-9]+:[0-9]+$"
"""Compiled by ``re``'s cache at the first throttled-replica list checked, not at every start."""


def _throttled_replicas(value: list[str]) -> str | None:
    """Kafka's ThrottledReplicaListValidator: ``partition:broker`` pairs, or ``*`` alone."""
    if value == ["*"] or all(re.match(_THROTTLED_REPLICA, item) for item in value):
        return None
    return "Must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
METADATA_VERSIONS = tuple(
    "0.8.0 0.8.1 0.8.2 0.9.0 0.10.0-IV0 0.10.0-IV1 0.10.1-IV0 0.10.1-IV1 0.10.1-IV2 0.10.2-IV0 0.11.0-IV0 "
    "0.11.0-IV1 0.11.0-IV2 1.0-IV0 1.1-IV0 2.0-IV0 2.0-IV1 2.1-IV0 2.1-IV1 2.1-IV2 2.2-IV0 2.2-IV1 2.3-IV0 "
    "2.3-IV1 2.4-IV0 2.4-IV1 2.5-IV0 2.6-IV0 2.7-IV0 2.7-IV1 2.7-IV2 2.8-IV0 2.8-IV1 3.0-IV0 3.0-IV1 3.1-IV0 "
    "3.2-IV0 3.3-IV0 3.3-IV1 3.3-IV2 3.3-IV3 3.4-IV0 3.5-IV0 3.5-IV1 3.5-IV2 3.6-IV0 3.6-IV1 3.6-IV2 3.7-IV0 "
    "3.7-IV1 3.7-IV2 3.7-IV3 3.7-IV4 3.8-IV0 3.9-IV0 4.0-IV0 4.0-IV1".split()
)
"""Kafka 3.9's MetadataVersion values, oldest first; the last production one is 3.9-IV0."""
LATEST_PRODUCTION_METADATA_VERSION = "3.9-IV0"
# A release alone ("2.8") names its latest production version, so releases after the latest production one
# ("4.0") have no short form.
_PRODUCTION_RELEASES = {v.split("-")[0] for v in METADATA_VERSIONS[: METADATA_VERSIONS.index(LATEST_PRODUCTION_METADATA_VERSION) + 1]}
_METADATA_VERSION_KEYS = frozenset(METADATA_VERSIONS) | _PRODUCTION_RELEASES


def _metadata_version(value: str) -> str | None:
    """Kafka's MetadataVersionValidator: a version string matches on its first three dot-separated parts
    for 0.x and its first two otherwise, so "0.10.0.0" and "2.8.1" are accepted (librdkafka's tests set
    message.format.version=0.10.0.0)."""
    parts = value.split(".")
    significant = 3 if value.startswith("0.") else 2
    key = value if significant >= len(parts) else ".".join(parts[:significant])
    return None if key in _METADATA_VERSION_KEYS else f"Version {value} is not a valid version"


def _k(
    name: str,
    type_: ConfigType,
    default: Any,
    synonyms: tuple[BrokerSynonym, ...] | str | None,
    doc: str,
    *,
    at_least: float | None = None,
    valid: tuple[str, ...] | None = None,
    check: Callable[[Any], str | None] | None = None,
    acted_on: bool = True,
) -> TopicConfigKey:
    if isinstance(synonyms, str):
        synonyms = (BrokerSynonym(synonyms),)
    return TopicConfigKey(
        name, type_, default, doc, at_least=at_least, valid=valid, acted_on=acted_on, synonyms=synonyms or (), check=check
    )


# Kafka 3.9's topic configs, in the order of its documentation (kafka.apache.org/39, "Topic-Level Configs").
# Doc strings are Kafka's TopicConfig docs.
TOPIC_CONFIG: tuple[TopicConfigKey, ...] = (
    _k("cleanup.policy", LIST, ["delete"], "log.cleanup.policy",
       'This config designates the retention policy to use on log segments. The "delete" policy (which is the '
       "default) will discard old segments when their retention time or size limit has been reached. The "
       '"compact" policy will enable log compaction, which retains the latest value for each key. It is also '
       'possible to specify both policies in a comma-separated list (e.g. "delete,compact"). In this case, old '
       "segments will be discarded per the retention time and size configuration, while retained segments will "
       "be compacted.",
       valid=("compact", "delete")),
    _k("compression.gzip.level", I, -1, "compression.gzip.level",
       "The compression level to use if compression.type is set to gzip.", check=_between_or_minus_one(1, 9)),
    _k("compression.lz4.level", I, 9, "compression.lz4.level",
       "The compression level to use if compression.type is set to lz4.", check=_between(1, 17)),
    _k("compression.type", S, "producer", "compression.type",
       "Specify the final compression type for a given topic. This configuration accepts the standard "
       "compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It additionally accepts 'uncompressed' which is "
       "equivalent to no compression; and 'producer' which means retain the original compression codec set by "
       "the producer.",
       valid=COMPRESSION_TYPES),
    _k("compression.zstd.level", I, 3, "compression.zstd.level",
       "The compression level to use if compression.type is set to zstd.", check=_between(-131072, 22)),
    _k("delete.retention.ms", L, 86_400_000, "log.cleaner.delete.retention.ms",
       "The amount of time to retain delete tombstone markers for log compacted topics. This setting also gives "
       "a bound on the time in which a consumer must complete a read if they begin from offset 0 to ensure that "
       "they get a valid snapshot of the final stage (otherwise delete tombstones may be collected before they "
       "complete their scan).",
       at_least=0),
    _k("file.delete.delay.ms", L, 60_000, "log.segment.delete.delay.ms",
       "The time to wait before deleting a file from the filesystem",
       at_least=0),
    _k("flush.messages", L, LONG_MAX, "log.flush.interval.messages",
       "This setting allows specifying an interval at which we will force an fsync of data written to the log. "
       "For example if this was set to 1 we would fsync after every message; if it were 5 we would fsync after "
       "every five messages. In general we recommend you not set this and use replication for durability and "
       "allow the operating system's background flush capabilities as it is more efficient. This setting can be "
       "overridden on a per-topic basis (see the per-topic configuration section).",
       at_least=1),
    _k("flush.ms", L, LONG_MAX, (BrokerSynonym("log.flush.interval.ms"), BrokerSynonym("log.flush.scheduler.interval.ms")),
       "This setting allows specifying a time interval at which we will force an fsync of data written to the "
       "log. For example if this was set to 1000 we would fsync after 1000 ms had passed. In general we recommend "
       "you not set this and use replication for durability and allow the operating system's background flush "
       "capabilities as it is more efficient.",
       at_least=0),
    _k("follower.replication.throttled.replicas", LIST, [], None,
       "A list of replicas for which log replication should be throttled on the follower side. The list should "
       "describe a set of replicas in the form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or "
       "alternatively the wildcard '*' can be used to throttle all replicas for this topic.",
       check=_throttled_replicas),
    _k("index.interval.bytes", I, 4096, "log.index.interval.bytes",
       "This setting controls how frequently Kafka adds an index entry to its offset index. The default setting "
       "ensures that we index a message roughly every 4096 bytes. More indexing allows reads to jump closer to "
       "the exact position in the log but makes the index larger. You probably don't need to change this.",
       at_least=0),
    _k("leader.replication.throttled.replicas", LIST, [], None,
       "A list of replicas for which log replication should be throttled on the leader side. The list should "
       "describe a set of replicas in the form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or "
       "alternatively the wildcard '*' can be used to throttle all replicas for this topic.",
       check=_throttled_replicas),
    _k("local.retention.bytes", L, -2, "log.local.retention.bytes",
       "The maximum size of local log segments that can grow for a partition before it deletes the old "
       "segments. Default value is -2, it represents `retention.bytes` value to be used. The effective value "
       "should always be less than or equal to `retention.bytes` value.",
       at_least=-2, acted_on=False),
    _k("local.retention.ms", L, -2, "log.local.retention.ms",
       "The number of milliseconds to keep the local log segment before it gets deleted. Default value is -2, "
       "it represents `retention.ms` value is to be used. The effective value should always be less than or "
       "equal to `retention.ms` value.",
       at_least=-2, acted_on=False),
    _k("max.compaction.lag.ms", L, LONG_MAX, "log.cleaner.max.compaction.lag.ms",
       "The maximum time a message will remain ineligible for compaction in the log. Only applicable for logs "
       "that are being compacted.",
       at_least=1),
    _k("max.message.bytes", I, 1_048_588, "message.max.bytes",
       "The largest record batch size allowed by Kafka (after compression if compression is enabled). If this "
       "is increased and there are consumers older than 0.10.2, the consumers' fetch size must also be increased "
       "so that they can fetch record batches this large. In the latest message format version, records are "
       "always grouped into batches for efficiency. In previous message format versions, uncompressed records "
       "are not grouped into batches and this limit only applies to a single record in that case.",
       at_least=0),
    _k("message.format.version", S, "3.0-IV1", "log.message.format.version",
       "[DEPRECATED] Specify the message format version the broker will use to append messages to the logs. "
       "The value of this config is always assumed to be `3.0` if `inter.broker.protocol.version` is 3.0 or "
       "higher (the actual config value is ignored). Otherwise, the value should be a valid ApiVersion. Some "
       "examples are: 0.10.0, 1.1, 2.8, 3.0. By setting a particular message format version, the user is "
       "certifying that all the existing messages on disk are smaller or equal than the specified version. "
       "Setting this value incorrectly will cause consumers with older versions to break as they will receive "
       "messages with a format that they don't understand.",
       check=_metadata_version, acted_on=False),
    _k("message.timestamp.after.max.ms", L, LONG_MAX, "log.message.timestamp.after.max.ms",
       "This configuration sets the allowable timestamp difference between the message timestamp and the "
       "broker's timestamp. The message timestamp can be later than or equal to the broker's timestamp, with "
       "the maximum allowable difference determined by the value set in this configuration. If "
       "message.timestamp.type=CreateTime, the message will be rejected if the difference in timestamps exceeds "
       "this specified threshold. This configuration is ignored if message.timestamp.type=LogAppendTime.",
       at_least=0),
    _k("message.timestamp.before.max.ms", L, LONG_MAX, "log.message.timestamp.before.max.ms",
       "This configuration sets the allowable timestamp difference between the broker's timestamp and the "
       "message timestamp. The message timestamp can be earlier than or equal to the broker's timestamp, with "
       "the maximum allowable difference determined by the value set in this configuration. If "
       "message.timestamp.type=CreateTime, the message will be rejected if the difference in timestamps exceeds "
       "this specified threshold. This configuration is ignored if message.timestamp.type=LogAppendTime.",
       at_least=0),
    _k("message.timestamp.difference.max.ms", L, LONG_MAX, "log.message.timestamp.difference.max.ms",
       "[DEPRECATED] The maximum difference allowed between the timestamp when a broker receives a message and "
       "the timestamp specified in the message. If message.timestamp.type=CreateTime, a message will be "
       "rejected if the difference in timestamp exceeds this threshold. This configuration is ignored if "
       "message.timestamp.type=LogAppendTime.",
       at_least=0),
    _k("message.timestamp.type", S, "CreateTime", "log.message.timestamp.type",
       "Define whether the timestamp in the message is message create time or log append time. The value "
       "should be either `CreateTime` or `LogAppendTime`",
       valid=TIMESTAMP_TYPES),
    _k("min.cleanable.dirty.ratio", D, 0.5, "log.cleaner.min.cleanable.ratio",
       "This configuration controls how frequently the log compactor will attempt to clean the log (assuming "
       "log compaction is enabled). By default we will avoid cleaning a log where more than 50% of the log has "
       "been compacted. This ratio bounds the maximum space wasted in the log by duplicates (at 50% at most 50% "
       "of the log could be duplicates). A higher ratio will mean fewer, more efficient cleanings but will mean "
       "more wasted space in the log. If the max.compaction.lag.ms or the min.compaction.lag.ms configurations "
       "are also specified, then the log compactor considers the log to be eligible for compaction as soon as "
       "either: (i) the dirty ratio threshold has been met and the log has had dirty (uncompacted) records for "
       "at least the min.compaction.lag.ms duration, or (ii) if the log has had dirty (uncompacted) records for "
       "at most the max.compaction.lag.ms period.",
       check=_between(0, 1)),
    _k("min.compaction.lag.ms", L, 0, "log.cleaner.min.compaction.lag.ms",
       "The minimum time a message will remain uncompacted in the log. Only applicable for logs that are being "
       "compacted.",
       at_least=0),
    _k("min.insync.replicas", I, 1, "min.insync.replicas",
       'When a producer sets acks to "all" (or "-1"), this configuration specifies the minimum number of '
       "replicas that must acknowledge a write for the write to be considered successful. If this minimum "
       "cannot be met, then the producer will raise an exception (either NotEnoughReplicas or "
       "NotEnoughReplicasAfterAppend). When used together, min.insync.replicas and acks allow you to enforce "
       "greater durability guarantees. A typical scenario would be to create a topic with a replication factor "
       'of 3, set min.insync.replicas to 2, and produce with acks of "all". This will ensure that the producer '
       "raises an exception if a majority of replicas do not receive a write.",
       at_least=1),
    _k("preallocate", B, False, "log.preallocate",
       "True if we should preallocate the file on disk when creating a new log segment.",
       acted_on=False),
    _k("remote.log.copy.disable", B, False, None,
       "Determines whether tiered data for a topic should become read only, and no more data uploading on a "
       "topic. Once this config is set to true, the local retention configuration (i.e. local.retention.ms/bytes) "
       "becomes irrelevant, and all data expiration follows the topic-wide retention configuration(i.e. "
       "retention.ms/bytes).",
       acted_on=False),
    _k("remote.log.delete.on.disable", B, False, None,
       "Determines whether tiered data for a topic should be deleted after tiered storage is disabled on a "
       "topic. This configuration should be enabled when trying to set `remote.storage.enable` from true to false",
       acted_on=False),
    _k("remote.storage.enable", B, False, None,
       "To enable tiered storage for a topic, set this configuration to true. To disable tiered storage for a "
       "topic that has it enabled, set this configuration to false. When disabling, you must also set "
       "remote.log.delete.on.disable to true.",
       acted_on=False),
    _k("retention.bytes", L, -1, "log.retention.bytes",
       "This configuration controls the maximum size a partition (which consists of log segments) can grow to "
       'before we will discard old log segments to free up space if we are using the "delete" retention policy. '
       "By default there is no size limit only a time limit. Since this limit is enforced at the partition level, "
       "multiply it by the number of partitions to compute the topic retention in bytes. Additionally, "
       'retention.bytes configuration operates independently of "segment.ms" and "segment.bytes" configurations. '
       "Moreover, it triggers the rolling of new segment if the retention.bytes is configured to zero."),
    _k("retention.ms", L, 604_800_000,
       (BrokerSynonym("log.retention.ms"), BrokerSynonym("log.retention.minutes", MS_PER_MINUTE),
        BrokerSynonym("log.retention.hours", MS_PER_HOUR)),
       "This configuration controls the maximum time we will retain a log before we will discard old log "
       'segments to free up space if we are using the "delete" retention policy. This represents an SLA on how '
       "soon consumers must read their data. If set to -1, no time limit is applied. Additionally, retention.ms "
       'configuration operates independently of "segment.ms" and "segment.bytes" configurations. Moreover, it '
       "triggers the rolling of new segment if the retention.ms condition is satisfied.",
       at_least=-1),
    _k("segment.bytes", I, 1_073_741_824, "log.segment.bytes",
       "This configuration controls the segment file size for the log. Retention and cleaning is always done a "
       "file at a time so a larger segment size means fewer files but less granular control over retention.",
       at_least=14),
    _k("segment.index.bytes", I, 10_485_760, "log.index.size.max.bytes",
       "This configuration controls the size of the index that maps offsets to file positions. We preallocate "
       "this index file and shrink it only after log rolls. You generally should not need to change this setting.",
       at_least=4),
    _k("segment.jitter.ms", L, 0, (BrokerSynonym("log.roll.jitter.ms"), BrokerSynonym("log.roll.jitter.hours", MS_PER_HOUR)),
       "The maximum random jitter subtracted from the scheduled segment roll time to avoid thundering herds of "
       "segment rolling",
       at_least=0),
    _k("segment.ms", L, 604_800_000, (BrokerSynonym("log.roll.ms"), BrokerSynonym("log.roll.hours", MS_PER_HOUR)),
       "This configuration controls the period of time after which Kafka will force the log to roll even if the "
       "segment file isn't full to ensure that retention can delete or compact old data.",
       at_least=1),
    _k("unclean.leader.election.enable", B, False, "unclean.leader.election.enable",
       "Indicates whether to enable replicas not in the ISR set to be elected as leader as a last resort, even "
       "though doing so may result in data loss."),
    _k("message.downconversion.enable", B, True, "log.message.downconversion.enable",
       "This configuration controls whether down-conversion of message formats is enabled to satisfy consume "
       "requests. When set to false, broker will not perform down-conversion for consumers expecting an older "
       "message format. The broker responds with UNSUPPORTED_VERSION error for consume requests from such older "
       "clients. This configuration does not apply to any message format conversion that might be required for "
       "replication to followers.",
       acted_on=False),
)

TOPIC_CONFIG_BY_NAME: dict[str, TopicConfigKey] = {key.name: key for key in TOPIC_CONFIG}


class LogConfig(FrozenFields):
    """The effective configuration of one topic's logs (one attribute per ``TOPIC_CONFIG`` key, its default the
    table's), immutable and compared by value: two configs are equal when their values and the overrides and
    broker defaults they came from are.

    Not a NamedTuple: the annotations of its 40 fields made ~4 M instructions of every start as one (each
    compiled into a ``ForwardRef``), as a frozen dataclass its generated methods ~18 M (docs/performance.md,
    "Start-up"). Its lists and mappings are read, never changed in place, so the defaults may be shared."""

    _FIELDS = (*(key.attribute for key in TOPIC_CONFIG), "overrides", "broker_defaults")
    _DERIVED = ("log_append_time", "effective_timestamp_before_max_ms", "effective_timestamp_after_max_ms")
    """Worked out from the fields once (not compared: they follow from the fields)."""
    __slots__ = (*_FIELDS, *_DERIVED)

    cleanup_policy: list[str]
    compression_gzip_level: int
    compression_lz4_level: int
    compression_type: str
    compression_zstd_level: int
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    follower_replication_throttled_replicas: list[str]
    index_interval_bytes: int
    leader_replication_throttled_replicas: list[str]
    local_retention_bytes: int
    local_retention_ms: int
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_format_version: str
    message_timestamp_after_max_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_difference_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    min_insync_replicas: int
    preallocate: bool
    remote_log_copy_disable: bool
    remote_log_delete_on_disable: bool
    remote_storage_enable: bool
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int
    unclean_leader_election_enable: bool
    message_downconversion_enable: bool
    overrides: Mapping[str, str]
    """The topic-level overrides this config was built from (DescribeConfigs source DYNAMIC_TOPIC_CONFIG)."""
    broker_defaults: Mapping[str, str]
    log_append_time: bool
    effective_timestamp_before_max_ms: int
    effective_timestamp_after_max_ms: int

    def __init__(self, **values: Any) -> None:
        """Each field's value, else its default (``LogConfig()``: every default)."""
        unknown = values.keys() - _DEFAULTS.keys()
        if unknown:
            raise TypeError(f"LogConfig has no field {', '.join(sorted(unknown))}")
        for name, default in _DEFAULTS.items():
            object.__setattr__(self, name, values.get(name, default))
        # What the append path asks of every batch, worked out once (each was a property read per append: five
        # Python calls per produce).
        set_ = object.__setattr__
        set_(self, "log_append_time", self.message_timestamp_type == "LogAppendTime")
        # KIP-937: the deprecated difference key still applies while a new key is left at its default.
        difference = self.message_timestamp_difference_max_ms
        set_(self, "effective_timestamp_before_max_ms", self.message_timestamp_before_max_ms if self.message_timestamp_before_max_ms != LONG_MAX else difference)
        set_(self, "effective_timestamp_after_max_ms", self.message_timestamp_after_max_ms if self.message_timestamp_after_max_ms != LONG_MAX else difference)

    @classmethod
    def from_props(cls, topic_overrides: Mapping[str, str] | None = None, broker_defaults: Mapping[str, str] | None = None) -> LogConfig:
        """Resolve every key: topic override, else the first broker synonym set, else the default.

        Raises ``ConfigError`` for unknown topic keys or invalid values (INVALID_CONFIG), as Kafka's
        ``LogConfig.validate`` does.
        """
        topic_overrides = dict(topic_overrides or {})
        broker_defaults = dict(broker_defaults or {})
        for name in topic_overrides:
            if name not in TOPIC_CONFIG_BY_NAME:
                raise ConfigError(f"Unknown topic config name: {name}")
        values = {key.attribute: _resolve(key, topic_overrides, broker_defaults)[0] for key in TOPIC_CONFIG}
        config = cls(**values, overrides=topic_overrides, broker_defaults=broker_defaults)
        config.validate()
        return config

    def validate(self) -> None:
        """Kafka's cross-key checks (LogConfig.validateValues and the tiered-storage checks)."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError(
                f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) > "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )
        if self.remote_storage_enable:
            if self.compact:
                raise ConfigError("Remote log storage is unsupported for the compacted topics")
            if self.retention_ms != -1 and self.local_retention_ms != -2 and not 0 <= self.local_retention_ms <= self.retention_ms:
                raise ConfigError(
                    f"Invalid value {self.local_retention_ms} for configuration local.retention.ms: Value must not be "
                    f"more than retention.ms property value: {self.retention_ms}"
                )
            if self.retention_bytes != -1 and self.local_retention_bytes != -2 and not 0 <= self.local_retention_bytes <= self.retention_bytes:
                raise ConfigError(
                    f"Invalid value {self.local_retention_bytes} for configuration local.retention.bytes: Value must "
                    f"not be more than retention.bytes property value: {self.retention_bytes}"
                )

    def with_overrides(self, topic_overrides: Mapping[str, str]) -> LogConfig:
        """The config for new topic overrides over the same broker defaults (IncrementalAlterConfigs)."""
        return LogConfig.from_props(topic_overrides, self.broker_defaults)

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_index_size(self) -> int:
        return self.segment_index_bytes

    def random_segment_jitter(self) -> int:
        """Kafka draws one jitter per segment, below min(segment.jitter.ms, segment.ms)."""
        if self.segment_jitter_ms == 0:
            return 0
        import random  # only with segment.jitter.ms set (0 by default): its import costs a start ~0.5 ms

        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))


def _resolve(key: TopicConfigKey, topic_overrides: Mapping[str, str], broker_defaults: Mapping[str, str]) -> tuple[Any, int]:
    """(value, DescribeConfigs source) of one key."""
    if key.name in topic_overrides:
        return key.parse(topic_overrides[key.name]), SOURCE_TOPIC
    for synonym in key.synonyms:
        raw = broker_defaults.get(synonym.name)
        if raw is None or str(raw).strip() == "":
            continue
        if synonym.scale == 1 and key.name != "retention.ms":
            return key.parse(raw), SOURCE_STATIC_BROKER
        try:
            value = int(str(raw).strip()) * synonym.scale
        except ValueError:
            raise ConfigError(f"Invalid value {raw} for configuration {synonym.name}: Not a number of type LONG") from None
        if key.name == "retention.ms" and value < 0:
            value = -1  # Kafka's broker maps any negative retention time to "unlimited"
        key.validate(value)
        return value, SOURCE_STATIC_BROKER
    return key.default, SOURCE_DEFAULT


_DEFAULTS: dict[str, Any] = {key.attribute: key.default for key in TOPIC_CONFIG} | {"overrides": {}, "broker_defaults": {}}
"""Each ``LogConfig`` field's default: the table's."""
