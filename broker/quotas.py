"""Client quotas: their configuration (Kafka's ``/config/users``, ``/config/clients`` and ``/config/ips``
entity configs, managed with AlterClientQuotas/DescribeClientQuotas and ``kafka-configs.sh``) and the
rate measurement that turns a client's traffic into a throttle time (Kafka's ``ClientQuotaManager`` over
a ``Sensor`` with a sampled ``Rate``).

Sans-IO: time is passed in (milliseconds). The quota that applies to a (user, client id) is the first of
Kafka's eight levels that has one: user+client, user+default client, user, default user+client, default
user+default client, default user, client, default client.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from typing import TYPE_CHECKING, Iterable, Mapping, Protocol

from odradek.protocol.api import Request
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.java_hash import int32, java_divide, java_double_string, java_min, java_round, java_whole
from odradek.protocol.values import FrozenFields

USER, CLIENT_ID, IP = "user", "client-id", "ip"
DEFAULT = "<default>"
_UNRESERVED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
"""What Java's URLEncoder leaves as is, less ``*`` (Kafka's Sanitizer encodes it, and space as %20)."""
"""ZooKeeper's name for a default entity (a null name on the wire)."""

PRODUCE, FETCH, REQUEST, CONTROLLER_MUTATION = "producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"
USER_CLIENT_KEYS: dict[str, str] = {PRODUCE: "LONG", FETCH: "LONG", REQUEST: "DOUBLE", CONTROLLER_MUTATION: "DOUBLE"}
IP_KEYS: dict[str, str] = {"connection_creation_rate": "INT"}
"""Each entity's quota keys and their ConfigDef types (Kafka's ``QuotaConfigs``)."""
INT_MAX, LONG_MAX = 2**31 - 1, 2**63 - 1


def quota_configs(config: Mapping[str, str]) -> dict[str, str]:
    """The quota keys of an entity's config (a user's also holds its SCRAM credentials)."""
    return {k: v for k, v in config.items() if k in USER_CLIENT_KEYS or k in IP_KEYS}


def quota_client(request: Request) -> tuple[str, str, str | None]:
    """(user, client id, connection id) a request's traffic is charged to; the user is the principal's name
    (``ANONYMOUS`` where nothing authenticated), as Kafka's session user."""
    context = request.context
    client_id = request.header.client_id or ""
    if context is None:
        return "ANONYMOUS", client_id, None
    return context.principal.name, client_id, context.connection_id


def sanitize(name: str | None) -> str:
    """Kafka's ``sanitizeEntityName``: ``<default>`` for None, else ``Sanitizer.sanitize`` (URL-encoding, with
    ``*`` as %2A and space as %20) — the znode name of the entity."""
    if name is None:
        return DEFAULT
    return "".join(chr(b) if chr(b) in _UNRESERVED else f"%{b:02X}" for b in name.encode())


def desanitize(name: str) -> str | None:
    return None if name == DEFAULT else urllib.parse.unquote(name)


if TYPE_CHECKING:  # a type for the checker only: creating a Protocol class costs ~0.13 M instructions a start
    class EntityConfigStore(Protocol):
        """Entity config znodes below ``/config``: ``users/<u>``, ``users/<u>/clients/<c>``, ``clients/<c>``,
        ``ips/<ip>``, each a dict of config keys to strings."""

        def entity_configs(self) -> Mapping[str, dict[str, str]]: ...

        def set_entity_config(self, path: str, props: dict[str, str]) -> None: ...


Entity = dict[str, "str | None"]
"""A client quota entity: entity type -> name (None for the default entity)."""


def entity_path(entity: Entity) -> tuple[str, dict[str, str]]:
    """The config path of an entity and the quota keys it takes (Kafka's ``parseAndSanitizeQuotaEntity``)."""
    if not entity:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    for entity_type, name in entity.items():
        if entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
    user, client, ip = (sanitize(entity[t]) if t in entity else None for t in (USER, CLIENT_ID, IP))
    if ip is not None:
        if user is not None or client is not None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity should not be used with user/client ID entity.")
        named_ip = entity[IP]
        if named_ip is not None and not is_ip(named_ip):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host.")
        return f"ips/{ip}", IP_KEYS
    if user is not None and client is not None:
        return f"users/{user}/clients/{client}", USER_CLIENT_KEYS
    if user is not None:
        return f"users/{user}", USER_CLIENT_KEYS
    return f"clients/{client}", USER_CLIENT_KEYS


def is_ip(name: str) -> bool:
    """A literal address. (Kafka also accepts a host name it can resolve; resolving would block the loop.)"""
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def entity_of(path: str) -> Entity:
    parts = path.split("/")
    if parts[0] == "ips":
        return {IP: desanitize(parts[1])}
    if parts[0] == "clients":
        return {CLIENT_ID: desanitize(parts[1])}
    if len(parts) == 4:
        return {USER: desanitize(parts[1]), CLIENT_ID: desanitize(parts[3])}
    return {USER: desanitize(parts[1])}


def typed_value(key: str, value: float, key_type: str) -> str:
    """The property string Kafka stores for a quota value: a LONG/INT must be whole (within 1e-6), compared
    as Kafka's ``ZkAdminManager`` compares it in doubles after a saturating cast, so NaN is taken as 0, the
    infinities are refused and 2^63 is Long.MAX_VALUE."""
    if key_type == "DOUBLE":
        return java_double_string(value)
    whole = java_whole(value + 1e-6, 64 if key_type == "LONG" else 32)
    if abs(float(whole) - value) > 1e-6:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a {key_type} value")
    return str(whole)


class FilterComponent(FrozenFields):
    """One DescribeClientQuotas component: ``exact`` name, the default entity (``match_default``) or any
    specified entity of the type (``match_any``)."""

    __slots__ = _FIELDS = ("entity_type", "name", "match_any")
    entity_type: str
    name: str | None
    match_any: bool

    def __init__(self, entity_type: str, name: str | None, match_any: bool) -> None:
        self._set(entity_type, name, match_any)

    def selects(self, name: str | None, present: bool) -> bool:
        return present and (self.match_any or name == self.name)


class ClientQuotaConfigs:
    """The quota configs, kept in the controller's entity configs."""

    def __init__(self, store: EntityConfigStore) -> None:
        self.store = store

    def alter(self, entity: Entity, ops: Iterable[tuple[str, float | None]], validate_only: bool) -> None:
        """Set (or with None remove) quota keys of one entity, as Kafka's ``ZkAdminManager.alterClientQuotas``."""
        path, keys = entity_path(entity)
        props = dict(self.store.entity_configs().get(path, {}))
        for key, value in ops:
            if value is None:
                props.pop(key, None)
            elif key not in keys:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
            else:
                props[key] = typed_value(key, value, keys[key])
        if not validate_only:
            self.store.set_entity_config(path, props)

    def describe(self, components: list[FilterComponent], strict: bool) -> list[tuple[Entity, dict[str, float]]]:
        """The entities a filter selects with their quota values (Kafka's ``describeClientQuotas``)."""
        by_type: dict[str, FilterComponent] = {}
        for c in components:
            if c.entity_type in by_type:
                what = {USER: "user", CLIENT_ID: "client", IP: "ip"}.get(c.entity_type)
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate {what} filter component entity type")
            if c.entity_type == "":
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
            if c.entity_type not in (USER, CLIENT_ID, IP):
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{c.entity_type}' not supported")
            by_type[c.entity_type] = c
        if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.")
        found = []
        for path, props in sorted(self.store.entity_configs().items()):
            entity = entity_of(path)
            keys = IP_KEYS if IP in entity else USER_CLIENT_KEYS
            values = {k: float(v) for k, v in props.items() if k in keys}
            if values and self._selects(by_type, entity, strict):
                found.append((entity, values))
        return found

    @staticmethod
    def _selects(by_type: dict[str, FilterComponent], entity: Entity, strict: bool) -> bool:
        """IP entities are described only by filters without user/client components, and the reverse; a
        type the filter does not name is allowed unless the filter is strict."""
        if IP in entity:
            if USER in by_type or CLIENT_ID in by_type:
                return False
            return by_type[IP].selects(entity[IP], True) if IP in by_type else not strict
        if IP in by_type:
            return False
        for t in (USER, CLIENT_ID):
            c = by_type.get(t)
            if not (c.selects(entity.get(t), t in entity) if c else t not in entity or not strict):
                return False
        return True

    def ip_connection_rate(self, ip: str) -> int | None:
        """An address's ``connection_creation_rate``: its own, else the default ips entity's; None (Kafka's
        default of Int.MaxValue) for no limit."""
        configs = self.store.entity_configs()
        if not configs:
            return None
        for path in (f"ips/{sanitize(ip)}", f"ips/{DEFAULT}"):
            value = configs.get(path, {}).get("connection_creation_rate")
            if value is not None:
                return None if int(value) == INT_MAX else int(value)
        return None

    def quota(self, key: str, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        """(sensor tags, bound) for a client: the tags name the sensor its traffic is measured in (clients
        under one user quota share it), the bound is the first of Kafka's eight levels with ``key`` set."""
        configs = self.store.entity_configs()
        if not configs:  # no quotas at all: the common case, kept cheap
            return ("", client_id), None
        u, c = sanitize(user), sanitize(client_id)
        levels = (
            (f"users/{u}/clients/{c}", (user, client_id)),
            (f"users/{u}/clients/{DEFAULT}", (user, client_id)),
            (f"users/{u}", (user, "")),
            (f"users/{DEFAULT}/clients/{c}", (user, client_id)),
            (f"users/{DEFAULT}/clients/{DEFAULT}", (user, client_id)),
            (f"users/{DEFAULT}", (user, "")),
            (f"clients/{c}", ("", client_id)),
            (f"clients/{DEFAULT}", ("", client_id)),
        )
        for path, tags in levels:
            value = configs.get(path, {}).get(key)
            if value is not None:
                return tags, float(value)
        return ("", client_id), None


class Rate:
    """Kafka's ``Rate`` over a ``SampledStat`` of ``samples`` windows of ``window_ms``: the sum of the
    retained samples divided by the elapsed time, counted as at least ``samples - 1`` full windows."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._values: list[float] = []
        self._starts: list[int] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._starts:
            self._values.append(0.0)
            self._starts.append(now_ms)
        if now_ms - self._starts[self._current] >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._starts):
                self._values.append(0.0)
                self._starts.append(now_ms)
            else:
                self._values[self._current], self._starts[self._current] = 0.0, now_ms
        self._values[self._current] += value

    def _purge(self, now_ms: int) -> None:
        for i, start in enumerate(self._starts):
            if now_ms - start >= self.samples * self.window_ms:
                self._values[i], self._starts[i] = 0.0, now_ms

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        if not self._starts:
            self._values.append(0.0)
            self._starts.append(now_ms)
        elapsed = now_ms - min(self._starts)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Per second."""
        self._purge(now_ms)
        return sum(self._values) / (self.window_size_ms(now_ms) / 1000)


class ClientQuotaManager:
    """One quota type (``producer_byte_rate``, ``consumer_byte_rate``, ...): a rate per sensor, measured
    against the client's bound; a client over it is told to wait Kafka's throttle time,
    ``(rate - bound) / bound * window``, at most ``max_throttle_ms`` when set.

    Kafka computes the throttle time in doubles, rounds it to a long, bounds it, then casts it to an int, and
    throttles only when that is positive: a bound of 0 gives Long.MAX_VALUE, which as an int is -1 (not
    throttled) unless ``max_throttle_ms`` bounds it first (request_percentage: throttled one window); a
    NaN or negative bound is always exceeded but never throttles. So here, rather than dividing by zero."""

    def __init__(self, key: str, configs: ClientQuotaConfigs, samples: int = 11, window_ms: int = 1000, max_throttle_ms: int | None = None) -> None:
        self.key = key
        self.configs = configs
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        self.sensors: dict[tuple[str, str], Rate] = {}

    def record_and_get_throttle_ms(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        tags, bound = self.configs.quota(self.key, user, client_id)
        if bound is None:
            return 0
        rate = self.sensors.setdefault(tags, Rate(self.samples, self.window_ms))
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle_ms = java_round(java_divide(measured - bound, bound) * rate.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            throttle_ms = min(throttle_ms, self.max_throttle_ms)
        return max(0, int32(throttle_ms))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back what was recorded for an answer not sent after all (a throttled fetch is answered empty)."""
        tags, _ = self.configs.quota(self.key, user, client_id)
        if tags in self.sensors:
            self.sensors[tags].record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> int | None:
        """Kafka's ``getMaxValueInQuotaWindow``: the most one answer may carry, bound x (samples - 1) windows."""
        _, bound = self.configs.quota(self.key, user, client_id)
        return None if bound is None else java_whole(bound * (self.samples - 1) * self.window_ms / 1000, 32)


class TokenBucket:
    """Kafka's ``TokenBucket`` stat (KIP-599): it holds at most a burst of ``bound`` x samples x window
    tokens, refilled at ``bound`` per second; a mutation takes its partitions' worth and may drive it below
    zero, which exceeds the quota until it is back at zero, ``-tokens / bound`` seconds later. In doubles, as
    Kafka's: a bound of 0 refills nothing (its throttle time is Long.MAX_VALUE), a negative one is always
    exceeded, a NaN one never."""

    def __init__(self, bound: float, burst: float, tokens: float, updated_ms: int) -> None:
        self.bound = bound
        self.burst = burst
        self.tokens = tokens
        self.updated_ms = updated_ms

    def refill(self, now_ms: int) -> float:
        self.tokens = java_min(self.burst, self.tokens + self.bound * (now_ms - self.updated_ms) / 1000)
        self.updated_ms = now_ms
        return self.tokens

    def throttle_ms(self, tokens: float) -> int:
        """How long until the bucket is back at zero from ``tokens`` below it (Kafka's ``throttleTimeMs``)."""
        return java_round(java_divide(-tokens, self.bound) * 1000)


class ControllerMutationQuota:
    """One CreateTopics/CreatePartitions/DeleteTopics request's share of its client's
    ``controller_mutation_rate`` (Kafka's Strict/PermissiveControllerMutationQuota). A strict quota (the
    versions whose clients know THROTTLING_QUOTA_EXCEEDED) refuses a mutation while the bucket is below
    zero; a permissive one (older versions) lets it through and only throttles the answer."""

    def __init__(self, bucket: TokenBucket | None, strict: bool) -> None:
        self.bucket, self.strict = bucket, strict
        self._throttle_ms, self._recorded_s = 0, 0.0

    def record(self, partitions: int, now_s: float) -> None:
        """Charge a mutation of ``partitions`` partitions; raises THROTTLING_QUOTA_EXCEEDED when strict and
        the client is over its rate (nothing is charged then)."""
        bucket = self.bucket
        if bucket is None:
            return
        now_ms = int(now_s * 1000)
        if self.strict and (tokens := bucket.refill(now_ms)) < 0:
            self._throttle_ms, self._recorded_s = bucket.throttle_ms(tokens), now_s
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED)  # the code's own text: Kafka's answer leaves it null
        bucket.refill(now_ms)
        bucket.tokens = java_min(bucket.burst, bucket.tokens - partitions)
        if not self.strict and (tokens := bucket.refill(now_ms)) < 0:
            self._throttle_ms, self._recorded_s = bucket.throttle_ms(tokens), now_s

    def throttle_ms(self, now_s: float) -> int:
        """The throttle time last met, less the time since (the mutations may have taken a while), as an int."""
        return int32(max(0, self._throttle_ms - int((now_s - self._recorded_s) * 1000)))


class ControllerMutationQuotaManager:
    """``controller_mutation_rate``: a token bucket per sensor (Kafka's ``ControllerMutationQuotaManager``)."""

    def __init__(self, configs: ClientQuotaConfigs, samples: int = 11, window_ms: int = 1000) -> None:
        self.configs = configs
        self.samples = samples
        self.window_ms = window_ms
        self.buckets: dict[tuple[str, str], TokenBucket] = {}

    def quota_for(self, user: str, client_id: str, strict: bool, now_s: float) -> ControllerMutationQuota:
        tags, bound = self.configs.quota(CONTROLLER_MUTATION, user, client_id)
        if bound is None:
            return ControllerMutationQuota(None, strict)
        burst = bound * self.samples * self.window_ms / 1000
        bucket = self.buckets.get(tags)
        if bucket is None:
            # Kafka's starts empty, last refilled at the epoch: its first refill fills it (to the burst, or
            # for a negative bound far below zero).
            bucket = self.buckets[tags] = TokenBucket(bound, burst, 0.0, 0)
        bucket.bound, bucket.burst = bound, burst  # a changed quota applies to the tokens the client has
        return ControllerMutationQuota(bucket, strict)


class ChannelThrottles:
    """Connections muted until a time (Kafka's ``ThrottledChannel``, KIP-219): the socket server reads nothing
    more from a throttled client's connection until its throttle time has passed."""

    def __init__(self) -> None:
        self.until: dict[str, float] = {}

    def throttle(self, connection_id: str, throttle_ms: int, now_s: float) -> None:
        self.until[connection_id] = max(self.until.get(connection_id, 0.0), now_s + throttle_ms / 1000)

    def forget(self, connection_id: str) -> None:
        """A closed connection's throttle goes with it."""
        self.until.pop(connection_id, None)

    def remaining_s(self, connection_id: str, now_s: float) -> float:
        end = self.until.get(connection_id)
        if end is None:
            return 0.0
        if end <= now_s:
            del self.until[connection_id]
            return 0.0
        return end - now_s


class ClientQuotas:
    """The broker's quota managers and throttled channels (Kafka's ``QuotaManagers``)."""

    def __init__(self, produce: ClientQuotaManager, fetch: ClientQuotaManager, controller_mutation: ControllerMutationQuotaManager, request: ClientQuotaManager) -> None:
        self.produce = produce
        self.fetch = fetch
        self.controller_mutation = controller_mutation
        self.request = request
        self.throttles = ChannelThrottles()
        self.entities = request.configs.store.entity_configs()
        """The client quota entities' configs: the metadata's own map, the same one for the broker's life, which
        both modes change in place as a quota is set or removed (the embedded controller's and ZooKeeper's
        notifications alike). Whether it is empty is whether any client quota is configured (without, nothing is
        measured or charged), which every produce and fetch asks twice: an attribute and a truth test, where
        asking the store is three Python calls."""

    @classmethod
    def from_config(cls, configs: ClientQuotaConfigs, samples: int, window_s: int) -> "ClientQuotas":
        """``quota.window.num`` samples of ``quota.window.size.seconds`` each."""
        window_ms = window_s * 1000
        return cls(
            ClientQuotaManager(PRODUCE, configs, samples, window_ms),
            ClientQuotaManager(FETCH, configs, samples, window_ms),
            ControllerMutationQuotaManager(configs, samples, window_ms),
            # Kafka's ClientRequestQuotaManager throttles a client for one window at most.
            ClientQuotaManager(REQUEST, configs, samples, window_ms, max_throttle_ms=window_ms),
        )

    def record_request_time(self, request: Request, handling_ns: int, now_s: float) -> int:
        """Charge the time spent handling a request to the client's ``request_percentage`` (percent of one
        thread: 1 ms is 0.1 percent for a second); over it, the throttle time (at most one quota window,
        as Kafka's ``ClientRequestQuotaManager``), for which the connection is muted."""
        user, client_id, _ = quota_client(request)
        throttle_ms = self.request.record_and_get_throttle_ms(user, client_id, handling_ns * 100 / 1e9, int(now_s * 1000))
        self.throttle(request, throttle_ms, now_s)
        return throttle_ms

    def controller_mutation_quota(self, request: Request, strict_since: int, now_s: float) -> ControllerMutationQuota:
        """The request's ``controller_mutation_rate`` quota: strict from version ``strict_since`` on."""
        user, client_id, _ = quota_client(request)
        return self.controller_mutation.quota_for(user, client_id, request.header.api_version >= strict_since, now_s)

    def throttle(self, request: Request, throttle_ms: int, now_s: float) -> None:
        """Mute the request's connection for ``throttle_ms`` (KIP-219)."""
        _, _, connection_id = quota_client(request)
        if throttle_ms > 0 and connection_id is not None:
            self.throttles.throttle(connection_id, throttle_ms, now_s)

    def record_produce(self, request: Request, size: int, now_s: float) -> int:
        """Charge a produce of ``size`` bytes to the client's ``producer_byte_rate``; the throttle time, for
        which its connection is then muted (with no quota configured: nothing charged, one test per request)."""
        if not self.entities:
            return 0
        user, client_id, connection_id = quota_client(request)
        throttle_ms = self.produce.record_and_get_throttle_ms(user, client_id, size, int(now_s * 1000))
        if throttle_ms > 0 and connection_id is not None:
            self.throttles.throttle(connection_id, throttle_ms, now_s)
        return throttle_ms

    def fetch_max_bytes(self, request: Request) -> int | None:
        """The most a consumer's fetch answer may carry under its ``consumer_byte_rate``, if it has one."""
        if not self.entities:
            return None
        user, client_id, _ = quota_client(request)
        return self.fetch.max_value_in_window(user, client_id)

    def record_fetch(self, request: Request, size: int, now_s: float) -> int:
        """Charge a consumer fetch answer of ``size`` bytes to its ``consumer_byte_rate``; when over, the
        throttle time (the answer is then sent empty, so its bytes are taken back) and the connection muted."""
        if not self.entities:
            return 0
        user, client_id, connection_id = quota_client(request)
        now_ms = int(now_s * 1000)
        throttle_ms = self.fetch.record_and_get_throttle_ms(user, client_id, size, now_ms)
        if throttle_ms > 0:
            self.fetch.unrecord(user, client_id, size, now_ms)
            if connection_id is not None:
                self.throttles.throttle(connection_id, throttle_ms, now_s)
        return throttle_ms
