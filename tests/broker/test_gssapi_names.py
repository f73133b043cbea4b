"""Kerberos principals to short names (Kafka's ``KerberosShortNamer`` rules), without a KDC; the
exchange itself is tested against a real KDC in tests/e2e/test_gssapi.py."""

from __future__ import annotations

import pytest

from odradek.broker.security.gssapi import KerberosName, parse_rules, short_name
from odradek.broker.security.sasl_mechanism import SaslError


def test_default_maps_the_default_realms_principals_to_their_first_component() -> None:
    rules = parse_rules(["DEFAULT"])
    assert short_name("alice@EXAMPLE.COM", rules, "EXAMPLE.COM") == "alice"
    assert short_name("kafka/host.example.com@EXAMPLE.COM", rules, "EXAMPLE.COM") == "kafka"
    assert short_name("bare", rules, "EXAMPLE.COM") == "bare"  # no host, no realm: as is
    with pytest.raises(SaslError, match="No rules apply to alice@OTHER.COM"):
        short_name("alice@OTHER.COM", rules, "EXAMPLE.COM")


def test_rules_format_match_substitute_and_change_case_in_order() -> None:
    rules = parse_rules([
        "RULE:[1:$1@$0](.*@OTHER\\.COM)s/@.*//L",
        "RULE:[2:$1](App.*)s/App/app/g",
        "RULE:[2:$1/$2@$0](.*@EXAMPLE\\.COM)s/.*/ops/",
        "DEFAULT",
    ])
    assert short_name("Alice@OTHER.COM", rules, "EXAMPLE.COM") == "alice"
    assert short_name("AppApp/h@X.COM", rules, "EXAMPLE.COM") == "appapp"
    assert short_name("svc/h@EXAMPLE.COM", rules, "EXAMPLE.COM") == "ops"
    assert short_name("bob@EXAMPLE.COM", rules, "EXAMPLE.COM") == "bob"


def test_a_rule_leaving_a_non_simple_name_fails_and_bad_rules_are_refused() -> None:
    with pytest.raises(SaslError, match="Non-simple name"):
        short_name("alice@EXAMPLE.COM", parse_rules(["RULE:[1:$1@$0]"]), "OTHER")
    with pytest.raises(ValueError, match="Invalid rule"):
        parse_rules(["RULE:1:$1"])
    assert KerberosName.parse("kafka/host@REALM") == KerberosName("kafka", "host", "REALM")
