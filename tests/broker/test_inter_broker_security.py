"""Which settings the broker's own connections take (broker/security/client.py), and where a listener's JAAS
configuration comes from, as Kafka's ``JaasContext.loadServerContext`` finds it. The connections
themselves are tested over real sockets in tests/controller/test_secure_cluster.py and
tests/e2e/test_security.py."""

from __future__ import annotations

import logging
import ssl

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.security.client import inter_broker_security
from odradek.broker.security.listeners import jaas_config
from odradek.storage.config_types import ConfigError
from tests.certificates import make_pki

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="{}" user_broker="secret";'


def config(**props: str) -> BrokerConfig:
    return BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL", **props})


def test_the_listener_and_mechanism_prefixed_jaas_config_comes_first_then_the_mechanism_prefixed_one() -> None:
    both = config(**{"listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS.format("listener"), "plain.sasl.jaas.config": PLAIN_JAAS.format("mechanism")})
    assert jaas_config(both, "INTERNAL", "PLAIN").options["password"] == "listener"
    assert jaas_config(both, "PLAINTEXT", "PLAIN").options["password"] == "mechanism"
    assert jaas_config(both, "INTERNAL", "SCRAM-SHA-256") is None


def test_a_broker_whose_inter_broker_login_cannot_be_made_does_not_start(tmp_path) -> None:
    """The inter-broker security is made at its first use, except on a listener that is not PLAINTEXT: there at
    start, so a login it cannot make stops the start as in Kafka, not the first connection to another broker."""
    from odradek import Broker

    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="secret";'
    broker = Broker(log_dir=tmp_path, config={
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": jaas,
    })
    with pytest.raises(RuntimeError, match="broker failed to start") as failed:
        broker.start()
    assert "needs the broker's own username and password in listener.name.internal.plain.sasl.jaas.config" in str(failed.value.__cause__)


def test_a_bare_sasl_jaas_config_is_ignored_by_a_broker_with_kafkas_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert jaas_config(config(**{"sasl.jaas.config": PLAIN_JAAS.format("x")}), "INTERNAL", "PLAIN") is None
    assert "Server config sasl.jaas.config should be prefixed with SASL mechanism name, ignoring config" in caplog.text


def test_inter_broker_security_takes_the_inter_broker_listeners_tls_and_sasl_settings(tmp_path) -> None:
    pki = make_pki(tmp_path)
    security = inter_broker_security(config(**{
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS.format("secret"),
        "listener.name.internal.ssl.truststore.type": "PEM",
        "listener.name.internal.ssl.truststore.location": str(pki.ca),
    }))
    assert (security.security_protocol, security.mechanism, security.username, security.password) == ("SASL_SSL", "PLAIN", "broker", "secret")
    assert security.ssl_context is not None and security.ssl_context.check_hostname  # ssl.endpoint.identification.algorithm=https
    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED
    unchecked = inter_broker_security(config(**{"inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                                                "plain.sasl.jaas.config": PLAIN_JAAS.format("secret"), "ssl.endpoint.identification.algorithm": ""}))
    assert unchecked.ssl_context is not None and not unchecked.ssl_context.check_hostname
    assert inter_broker_security(config()).security_protocol == "PLAINTEXT"


def test_an_inter_broker_sasl_login_without_username_and_password_is_refused_at_start() -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="secret";'
    with pytest.raises(ConfigError, match="needs the broker's own username and password in listener.name.internal.plain.sasl.jaas.config"):
        inter_broker_security(config(**{"inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.internal.plain.sasl.jaas.config": jaas}))


def test_an_inter_broker_mechanism_odradeks_client_does_not_speak_is_refused_at_start() -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="p";'
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol DIGEST-MD5: odradek's client implements GSSAPI, OAUTHBEARER, PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512"):
        inter_broker_security(config(**{"inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "DIGEST-MD5", "listener.name.internal.digest-md5.sasl.jaas.config": jaas}))


def test_an_unsecured_oauthbearer_login_needs_its_principal_claim() -> None:
    """As Kafka's login at start: "No principal name in JWT claim: sub"."""
    settings = {"inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}
    without = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_name="b";'
    with pytest.raises(ConfigError, match="No principal name in JWT claim: sub"):
        inter_broker_security(config(**settings, **{"listener.name.internal.oauthbearer.sasl.jaas.config": without}))
    with_sub = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker" unsecuredLoginLifetimeSeconds="60";'
    security = inter_broker_security(config(**settings, **{"listener.name.internal.oauthbearer.sasl.jaas.config": with_sub}))
    assert security.oauth is not None
    import base64
    import json
    import time

    header, claims, signature = security.oauth.token().split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"} and signature == ""
    decoded = json.loads(base64.urlsafe_b64decode(claims + "=="))
    assert decoded["sub"] == "broker" and 55 <= decoded["exp"] - time.time() <= 61


def test_kerberos_between_brokers_needs_a_service_name_and_takes_the_listeners_keytab() -> None:
    """As Kafka's ``KerberosLogin``: the service name from the JAAS entry or sasl.kerberos.service.name."""
    jaas = 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/etc/kafka.keytab" principal="kafka/b1@R";'
    settings = {"inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "GSSAPI", "listener.name.internal.gssapi.sasl.jaas.config": jaas}
    with pytest.raises(ConfigError, match="No serviceName defined in either JAAS or Kafka config"):
        inter_broker_security(config(**settings))
    security = inter_broker_security(config(**settings, **{"sasl.kerberos.service.name": "kafka"}))
    assert security.kerberos is not None
    assert (security.kerberos.service_name, security.kerberos.keytab, security.kerberos.principal) == ("kafka", "/etc/kafka.keytab", "kafka/b1@R")
