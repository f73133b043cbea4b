"""Group configs (KIP-848, KIP-932): a GROUP config resource's keys, as Kafka 4.4's ``GroupConfig`` has them.

A group config overrides, for one group, a broker key of the group coordinator (``share.delivery.count.limit``
overrides ``group.share.delivery.count.limit``); a few keys have no broker key and only a default of their own
(``share.auto.offset.reset``). DescribeConfigs answers every key with the value in force: the group's override
(DYNAMIC_GROUP_CONFIG), else its broker key's value, with the broker key's source, as Kafka 4.4 does. The
internal keys (``consumer.assignor.offload.enable``...) are described only when a group sets them.

A change is checked as ``GroupConfig.validate`` checks the group's whole new set: every name known, every value
of its type and past its own lower bound, then within the bounds the broker sets for all groups
(``group.share.min.delivery.count.limit``...), a session timeout above its heartbeat interval. Every refusal is
INVALID_CONFIG with Kafka's message. The bounds odradek's broker table has are read from it; the others are
Kafka 4.4's defaults.

What a config changes: a share partition created after the change starts where ``share.auto.offset.reset``
says, and runs with the group's ``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
``share.partition.max.record.locks`` and ``share.isolation.level``. The other keys are stored and described
only (docs/protocol.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from odradek.broker.config import BROKER_KEYS, BrokerConfig
from odradek.storage.config_types import ConfigKey, ConfigType, InvalidValueError

SOURCE_DYNAMIC_GROUP = 8
"""DescribeConfigs' ConfigSource DYNAMIC_GROUP_CONFIG."""

I, B, S, LIST, L = ConfigType.INT, ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.LIST, ConfigType.LONG


class GroupConfigError(InvalidValueError):
    """A group config Kafka refuses: INVALID_CONFIG with this message."""


@dataclass(frozen=True)
class Bounds:
    """The broker keys bounding a group key (either may be None), checked as ``validateIntRange`` /
    ``validateIntMin`` / ``validateIntMax`` word their refusals."""

    least: str | None
    most: str | None

    def check(self, name: str, value: int, broker: Callable[[str], Any]) -> None:
        low = None if self.least is None else broker(self.least)
        high = None if self.most is None else broker(self.most)
        if low is not None and high is not None:
            if not low <= value <= high:
                raise GroupConfigError(f"{name} must be in the range {low} to {high} inclusive.")
        elif high is not None and value > high:
            raise GroupConfigError(f"{name} must be less than or equal to {high}")
        elif low is not None and value < low:
            raise GroupConfigError(f"{name} must be greater than or equal to {low}")


@dataclass(frozen=True)
class GroupKey:
    key: ConfigKey
    """Name, type, the default used when there is no broker key, Kafka's own lower bound or valid strings."""
    broker_key: str | None = None
    """The broker key the group key overrides (DescribeConfigs' synonym), None for keys of the group alone."""
    bounds: Bounds | None = None
    internal: bool = False
    """``defineInternal``: described only when the group sets it."""

    @property
    def name(self) -> str:
        return self.key.name


def _g(name: str, type_: ConfigType, default: Any, doc: str, broker_key: str | None = None, *, at_least: int | None = None,
       valid: tuple[str, ...] | None = None, bounds: tuple[str | None, str | None] | None = None, internal: bool = False) -> GroupKey:
    return GroupKey(ConfigKey(name, type_, default, doc, at_least=at_least, valid=valid), broker_key, Bounds(*bounds) if bounds else None, internal)


def _range(prefix: str, what: str) -> tuple[str, str]:
    return f"group.{prefix}.min.{what}", f"group.{prefix}.max.{what}"


GROUP_CONFIG: tuple[GroupKey, ...] = (
    _g("consumer.session.timeout.ms", I, 45000, "The timeout to detect client failures when using the consumer group protocol.",
       "group.consumer.session.timeout.ms", at_least=1, bounds=_range("consumer", "session.timeout.ms")),
    _g("consumer.heartbeat.interval.ms", I, 5000, "The heartbeat interval given to the members of a consumer group.",
       "group.consumer.heartbeat.interval.ms", at_least=1, bounds=_range("consumer", "heartbeat.interval.ms")),
    _g("consumer.assignment.interval.ms", I, 1000, "The interval between assignment updates for a consumer group.",
       "group.consumer.assignment.interval.ms", at_least=0, bounds=_range("consumer", "assignment.interval.ms")),
    _g("consumer.assignor.offload.enable", B, True, "Whether a consumer group's assignment is computed off the coordinator's thread.",
       "group.consumer.assignor.offload.enable", internal=True),
    _g("share.session.timeout.ms", I, 45000, "The timeout to detect client failures when using the share group protocol.",
       "group.share.session.timeout.ms", at_least=1, bounds=_range("share", "session.timeout.ms")),
    _g("share.heartbeat.interval.ms", I, 5000, "The heartbeat interval given to the members of a share group.",
       "group.share.heartbeat.interval.ms", at_least=1, bounds=_range("share", "heartbeat.interval.ms")),
    _g("share.record.lock.duration.ms", I, 30000, "How long a share group's consumer holds the records it acquired.",
       "group.share.record.lock.duration.ms", at_least=1000, bounds=_range("share", "record.lock.duration.ms")),
    _g("share.delivery.count.limit", I, 5, "How many times a record of the share group is delivered before it is archived.",
       "group.share.delivery.count.limit", at_least=2, bounds=_range("share", "delivery.count.limit")),
    _g("share.partition.max.record.locks", I, 2000, "The most records of a share partition in flight at once.",
       "group.share.partition.max.record.locks", at_least=100, bounds=_range("share", "partition.max.record.locks")),
    _g("share.auto.offset.reset", S, "latest", "Where a share partition the group never consumed starts: earliest, latest, or "
       "by_duration:<ISO-8601 duration> (the first record at most that long ago)."),
    _g("share.isolation.level", S, "read_uncommitted", "read_committed: the group is delivered committed transactional records only; "
       "read_uncommitted: every record.", valid=("read_committed", "read_uncommitted")),
    _g("share.renew.acknowledge.enable", B, True, "Whether the share group's consumers may renew their acquisition locks."),
    _g("share.assignment.interval.ms", I, 1000, "The interval between assignment updates for a share group.",
       "group.share.assignment.interval.ms", at_least=0, bounds=_range("share", "assignment.interval.ms")),
    _g("share.assignor.offload.enable", B, True, "Whether a share group's assignment is computed off the coordinator's thread.",
       "group.share.assignor.offload.enable", internal=True),
    _g("streams.session.timeout.ms", I, 45000, "The timeout to detect client failures when using the streams group protocol.",
       "group.streams.session.timeout.ms", at_least=1, bounds=_range("streams", "session.timeout.ms")),
    _g("streams.heartbeat.interval.ms", I, 5000, "The heartbeat interval given to the members of a streams group.",
       "group.streams.heartbeat.interval.ms", at_least=1, bounds=_range("streams", "heartbeat.interval.ms")),
    _g("streams.num.standby.replicas", I, 0, "The number of standby replicas of each task.",
       "group.streams.num.standby.replicas", at_least=0, bounds=(None, "group.streams.max.standby.replicas")),
    _g("streams.initial.rebalance.delay.ms", I, 3000, "How long a new streams group waits for more members before its first rebalance.",
       "group.streams.initial.rebalance.delay.ms", at_least=0),
    _g("streams.assignment.interval.ms", I, 1000, "The interval between assignment updates for a streams group.",
       "group.streams.assignment.interval.ms", at_least=0, bounds=_range("streams", "assignment.interval.ms")),
    _g("streams.assignor.offload.enable", B, True, "Whether a streams group's assignment is computed off the coordinator's thread.",
       "group.streams.assignor.offload.enable", internal=True),
    _g("streams.task.offset.interval.ms", I, 60000, "How often warm-up tasks' changelog offsets are reported.",
       "group.streams.task.offset.interval.ms", at_least=1, bounds=("group.streams.min.task.offset.interval.ms", None), internal=True),
    _g("streams.num.warmup.replicas", I, 2, "The most warm-up task replicas.",
       "group.streams.num.warmup.replicas", at_least=0, bounds=(None, "group.streams.max.warmup.replicas"), internal=True),
    _g("streams.rack.aware.assignment.tags", LIST, "", "The client tag keys standby replicas are spread across.",
       "group.streams.rack.aware.assignment.tags"),
    _g("streams.acceptable.recovery.lag", L, 10000, "The most a client may lag to be given an active task.",
       "group.streams.acceptable.recovery.lag", at_least=0, internal=True),
    _g("streams.assignor.name", S, None, "The streams group's task assignor, by the name of one of the broker's group.streams.assignors.",
       "group.streams.assignors"),
    _g("errors.deadletterqueue.topic.name", S, "", "The share group's dead-letter queue topic (blank: none)."),
    _g("errors.deadletterqueue.copy.record.enable", B, False, "Whether the dead-letter queue gets the original record, or only its context."),
)
"""Kafka 4.4's GroupConfig, in its order (the order values are checked in)."""

GROUP_KEYS: dict[str, GroupKey] = {g.name: g for g in GROUP_CONFIG}

KAFKA_BROKER_DEFAULTS: dict[str, Any] = {
    "group.consumer.assignment.interval.ms": 1000,
    "group.consumer.min.assignment.interval.ms": 0, "group.consumer.max.assignment.interval.ms": 15000,
    "group.consumer.assignor.offload.enable": True,
    "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10,
    "group.share.min.partition.max.record.locks": 100, "group.share.max.partition.max.record.locks": 4000,
    "group.share.assignment.interval.ms": 1000,
    "group.share.min.assignment.interval.ms": 0, "group.share.max.assignment.interval.ms": 15000,
    "group.share.assignor.offload.enable": True,
    "group.streams.session.timeout.ms": 45000, "group.streams.min.session.timeout.ms": 45000, "group.streams.max.session.timeout.ms": 60000,
    "group.streams.heartbeat.interval.ms": 5000, "group.streams.min.heartbeat.interval.ms": 5000, "group.streams.max.heartbeat.interval.ms": 15000,
    "group.streams.num.standby.replicas": 0, "group.streams.max.standby.replicas": 2,
    "group.streams.initial.rebalance.delay.ms": 3000,
    "group.streams.assignment.interval.ms": 1000, "group.streams.min.assignment.interval.ms": 0, "group.streams.max.assignment.interval.ms": 15000,
    "group.streams.assignor.offload.enable": True,
    "group.streams.task.offset.interval.ms": 60000, "group.streams.min.task.offset.interval.ms": 15000,
    "group.streams.num.warmup.replicas": 2, "group.streams.max.warmup.replicas": 20,
    "group.streams.rack.aware.assignment.tags": [],
    "group.streams.acceptable.recovery.lag": 10000,
    "group.streams.assignors": ["sticky"],
}
"""Kafka 4.4's defaults of the group coordinator's broker keys odradek's broker table does not have (the
streams group protocol, KIP-1071, is not served; the bounds are fixed at Kafka's defaults)."""

SESSION_AND_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)

_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def iso_duration_ms(text: str) -> int | None:
    """Java's ``Duration.parse`` (``PnDTnHnMn.nS``) in milliseconds; None for a text it refuses."""
    found = _DURATION.fullmatch(text)
    if found is None or text.upper().endswith("T") or not any(found.group(i) is not None for i in (2, 3, 4, 5)):
        return None
    sign, days, hours, minutes, seconds, fraction = found.groups()
    ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 + int(seconds or 0) * 1000
    if fraction:
        ms += (-1 if (seconds or "").startswith("-") else 1) * int(fraction.ljust(3, "0")[:3])
    return -ms if sign == "-" else ms


def auto_offset_reset_duration_ms(value: str) -> int | None:
    """The duration of ``by_duration:<duration>``; None for ``earliest`` and ``latest``. Raises Kafka's
    refusal for anything else (a negative duration among them)."""
    if value in ("earliest", "latest"):
        return None
    prefix = "by_duration:"
    duration = iso_duration_ms(value[len(prefix):].strip()) if value.startswith(prefix) else None
    if duration is None or duration < 0:
        raise GroupConfigError(
            f"Invalid value {value} for configuration share.auto.offset.reset: Invalid value `{value}` for configuration share.auto.offset.reset. "
            "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
        )
    return duration


def broker_lookup(broker_config: BrokerConfig) -> Callable[[str], Any]:
    """A broker key's value: odradek's broker config where it has the key, else Kafka 4.4's default."""

    def lookup(name: str) -> Any:
        return broker_config[name] if name in BROKER_KEYS else KAFKA_BROKER_DEFAULTS[name]

    return lookup


def parse_group_configs(props: Mapping[str, str]) -> dict[str, Any]:
    """Each key's typed value; Kafka's refusal of an unknown name or an invalid value."""
    for name in props:
        if name not in GROUP_KEYS:
            raise GroupConfigError(f"Unknown group config name: {name}")
    parsed = {g.name: g.key.parse(props[g.name]) for g in GROUP_CONFIG if g.name in props}
    if "share.auto.offset.reset" in parsed:
        auto_offset_reset_duration_ms(parsed["share.auto.offset.reset"])
    return parsed


def validate_group_configs(props: Mapping[str, str], broker: Callable[[str], Any]) -> None:
    """``GroupConfig.validate`` of a group's whole new set of overrides."""
    parsed = parse_group_configs(props)
    for g in GROUP_CONFIG:
        if g.bounds is not None and g.name in parsed:
            g.bounds.check(g.name, parsed[g.name], broker)
    assignor = parsed.get("streams.assignor.name")
    if assignor is not None and assignor not in broker("group.streams.assignors"):
        raise GroupConfigError(f"streams.assignor.name '{assignor}' is not a registered task assignor. Registered assignors are: [{', '.join(broker('group.streams.assignors'))}].")
    for session, heartbeat in SESSION_AND_HEARTBEAT:
        if session in parsed or heartbeat in parsed:
            session_ms = parsed.get(session, broker(GROUP_KEYS[session].broker_key or session))
            heartbeat_ms = parsed.get(heartbeat, broker(GROUP_KEYS[heartbeat].broker_key or heartbeat))
            if session_ms <= heartbeat_ms:
                raise GroupConfigError(f"{session} must be greater than {heartbeat}")
    dlq = parsed.get("errors.deadletterqueue.topic.name")
    if dlq and dlq.startswith("__"):
        raise GroupConfigError("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")


def group_value(name: str, overrides: Mapping[str, str], broker: Callable[[str], Any]) -> Any:
    """The typed value of group key ``name`` in force for a group with these overrides."""
    g = GROUP_KEYS[name]
    if name in overrides:
        return g.key.parse(overrides[name])
    return g.key.default if g.broker_key is None else broker(g.broker_key)
