"""Every key of Kafka's dynamic broker config tables, set per broker ("0") and as the cluster default (""),
with AlterConfigs and IncrementalAlterConfigs, answered by odradek as by the real Kafka 3.9.1.

The keys come from the real Kafka, not from odradek: the broker keys its DescribeConfigs reports writable
(``DynamicBrokerConfig.AllDynamicConfigs``), the broker quota keys of ``DynamicConfig.Broker`` (not
described), and the per-listener keys under the listener prefix ``listener.name.plaintext.``. Each is sent
with the value the Kafka runs with (or, where it has none, a value of the key's type), so that the answer
is about whether the key may change at that level, not about a value. These requests are validate_only:
the shared Kafka is never changed by them. A few keys are then applied for real, with values that change
nothing (passwords are refused when written, without ``password.encoder.secret``). Error codes and
messages must match.
"""

from __future__ import annotations

import time

import pytest

from odradek.protocol.api import ApiKey

BROKER = 4
SET = 0
QUOTA_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate", "replica.alter.log.dirs.io.max.bytes.per.second")
"""``QuotaConfigs.brokerQuotaConfigs``: dynamic broker keys that are no ``KafkaConfig`` keys (not described)."""
LISTENER_PREFIX = "listener.name.plaintext."
PER_LISTENER = (
    # SslConfigs.RECONFIGURABLE_CONFIGS (only per listener), DynamicListenerConfig's SSL and SASL keys,
    # SocketServer's and DataPlaneAcceptor's listener keys
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates", "ssl.protocol", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.client.auth",
    "ssl.endpoint.identification.algorithm", "sasl.enabled.mechanisms", "sasl.kerberos.service.name",
    "sasl.kerberos.min.time.before.relogin", "sasl.login.refresh.window.factor", "plain.sasl.jaas.config",
    "max.connections", "max.connection.creation.rate", "num.network.threads", "principal.builder.class",
)
"""A sample of keys Kafka takes under a listener prefix, each of the families it treats apart."""
VALUE_WHEN_UNSET = {
    "log.flush.interval.ms": "9223372036854775807",
    "log.retention.ms": "604800000",
    "log.roll.ms": "604800000",
    "log.roll.jitter.ms": "0",
    "sasl.kerberos.service.name": "kafka",
    "ssl.provider": "SunJSSE",
    "ssl.engine.factory.class": "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory",
    "ssl.secure.random.implementation": "SHA1PRNG",
    "ssl.keystore.location": "/nonexistent/keystore.jks",
    "ssl.truststore.location": "/nonexistent/truststore.jks",
    "leader.replication.throttled.rate": "1000000",
    "follower.replication.throttled.rate": "1000000",
    "replica.alter.log.dirs.io.max.bytes.per.second": "1000000",
}
"""Values for keys the Kafka has no value for (passwords take ``secret``; the listeners, each broker's own)."""


def described_dynamic_keys(wire) -> dict[str, str | None]:
    body = {"resources": [{"resource_type": BROKER, "resource_name": "0", "configuration_keys": None}], "include_synonyms": False, "include_documentation": False}
    result = wire.call(ApiKey.DescribeConfigs, 4, body).results[0]
    assert result.error_code == 0
    return {c.name: None if c.is_sensitive else c.value for c in result.configs if not c.read_only}


def keys_and_values(wire) -> dict[str, str | None]:
    """Each key to send, with the value the Kafka runs with (None where it has none, or hides it)."""
    described = described_dynamic_keys(wire)
    assert "sasl.kerberos.min.time.before.relogin" in described and "log.retention.ms" in described
    keys = {**described, **dict.fromkeys(QUOTA_KEYS)}
    keys.update({LISTENER_PREFIX + k: described.get(k.removeprefix("plain.")) for k in PER_LISTENER})
    return keys


def value_for(name: str, kafka_value: str | None, bootstrap: str) -> str:
    base = name.removeprefix(LISTENER_PREFIX)
    if base in ("listeners", "advertised.listeners"):
        return f"PLAINTEXT://{bootstrap}"
    if kafka_value is not None:
        return kafka_value
    if base in VALUE_WHEN_UNSET:
        return VALUE_WHEN_UNSET[base]
    if base.endswith(("password", "jaas.config", "certificate.chain", "keystore.key", "truststore.certificates")):
        return "secret"
    raise AssertionError(f"no value for {name}")


def alter_one(wire, api: str, resource: str, name: str, value: str, validate_only: bool) -> tuple[int, str | None]:
    config = {"name": name, "value": value} if api == "AlterConfigs" else {"name": name, "config_operation": SET, "value": value}
    body = {"resources": [{"resource_type": BROKER, "resource_name": resource, "configs": [config]}], "validate_only": validate_only}
    (result,) = wire.call(ApiKey[api], 1, body).responses
    return result.error_code, result.error_message


def answer(wire, bootstrap: str, api: str, resource: str, name: str, kafka_value: str | None) -> tuple[int, str | None]:
    return alter_one(wire, api, resource, name, value_for(name, kafka_value, bootstrap), validate_only=True)


@pytest.mark.parametrize("resource", ["0", ""], ids=["per-broker", "cluster-default"])
@pytest.mark.parametrize("api", ["AlterConfigs", "IncrementalAlterConfigs"])
def test_every_dynamic_key_is_answered_as_kafka_answers_it(odradek_as_kafka, real_kafka, connect, api, resource):
    ours, theirs = connect(odradek_as_kafka.bootstrap), connect(real_kafka.bootstrap)
    differ = {}
    for name, kafka_value in sorted(keys_and_values(theirs).items()):
        expected = answer(theirs, real_kafka.bootstrap, api, resource, name, kafka_value)
        got = answer(ours, odradek_as_kafka.bootstrap, api, resource, name, kafka_value)
        if got != expected:
            differ[name] = {"odradek": got, "kafka": expected}
    assert differ == {}


APPLIED = [
    ("0", "sasl.kerberos.min.time.before.relogin", "60000"),  # librdkafka's admin test 0081 sets this one
    ("0", "listener.name.plaintext.max.connections", "2147483647"),
    ("", "listener.name.plaintext.max.connections", "2147483647"),
    ("0", "listener.name.plaintext.ssl.key.password", "secret"),  # refused: no password.encoder.secret
]
"""Keys applied for real (each broker's dynamic configs emptied again after), with values that change
nothing the broker does."""


def described(wire, resource: str, name: str) -> tuple | None:
    """The key as DescribeConfigs shows it at that level, synonyms included; None when it is not listed."""
    body = {"resources": [{"resource_type": BROKER, "resource_name": resource, "configuration_keys": [name]}], "include_synonyms": True, "include_documentation": False}
    configs = wire.call(ApiKey.DescribeConfigs, 4, body).results[0].configs
    return None if not configs else tuple(
        (c.value, c.config_source, c.read_only, c.config_type, c.is_sensitive, [(s.name, s.value, s.source) for s in c.synonyms]) for c in configs
    )


@pytest.mark.parametrize("api", ["AlterConfigs", "IncrementalAlterConfigs"])
@pytest.mark.parametrize(("resource", "name", "value"), APPLIED)
def test_applied_as_kafka_applies_them(odradek_as_kafka, real_kafka, connect, api, resource, name, value):
    """The answer, and then how DescribeConfigs shows the key at both levels (Kafka applies a change when
    ZooKeeper tells it, a moment after answering: its description is read again for a while)."""
    ours, theirs = connect(odradek_as_kafka.bootstrap), connect(real_kafka.bootstrap)
    try:
        got = alter_one(ours, api, resource, name, value, validate_only=False)
        assert got == alter_one(theirs, api, resource, name, value, validate_only=False)
        for level in ("0", ""):
            expected = described(ours, level, name)
            deadline = time.monotonic() + 15
            while described(theirs, level, name) != expected and time.monotonic() < deadline:
                time.sleep(0.2)
            assert described(theirs, level, name) == expected, level
        if got[0] == 0:
            assert described(ours, resource, name)[0][1] == (2 if resource else 3)  # DYNAMIC_(DEFAULT_)BROKER_CONFIG
    finally:
        for wire in (ours, theirs):
            for level in ("0", ""):
                empty = {"resources": [{"resource_type": BROKER, "resource_name": level, "configs": []}], "validate_only": False}
                assert wire.call(ApiKey.AlterConfigs, 1, empty).responses[0].error_code == 0
