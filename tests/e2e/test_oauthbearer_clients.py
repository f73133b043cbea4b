"""odradek's own OAUTHBEARER client: brokers that log in to each other with OAUTHBEARER
(``sasl.mechanism.inter.broker.protocol=OAUTHBEARER``, unsecured tokens as Kafka's default login and
validator make them), an odradek broker and a Kafka 3.9.1 broker replicating to each other; and odradek's
tools logging in with Kafka's OAUTHBEARER client properties."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import kafka_jvm
from kafka_jvm import free_port
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker
from tests.polling import wait_for

JAAS = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";'


def settings(broker_id: int, plain: int, sasl: int, connect: str) -> dict[str, str]:
    return {
        "broker.id": str(broker_id),
        "zookeeper.connect": connect,
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
        "offsets.topic.replication.factor": "1",
        **kafka_jvm.CLUSTER_STOP_SETTINGS,
    }


def unsecured_token(sub: str) -> str:
    encode = lambda document: base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()  # noqa: E731
    now = int(time.time())
    return f"{encode({'alg': 'none'})}.{encode({'sub': sub, 'iat': now, 'exp': now + 600})}."


def test_brokers_log_in_to_each_other_with_oauthbearer_and_tools_with_a_token(real_kafka, tmp_path: Path) -> None:
    connect = real_kafka.zookeeper.connect + "/oauthbearer-cluster"
    ports = {0: (free_port(), free_port()), 5: (free_port(), free_port())}
    kafka = kafka_jvm.KafkaBroker(tmp_path / "kafka", connect, broker_id=5, settings=settings(5, *ports[5], connect), port=ports[5][0]).start()
    try:
        with Broker(log_dir=tmp_path / "b0", subprocess=True, config=settings(0, *ports[0], connect)):
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[0][0]}"})
            wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 2, timeout_s=30, what="both brokers registered")
            topic = "oauth-replicated"
            admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[0, 5], [5, 0]])])[topic].result(30)

            def isrs_full() -> bool:
                partitions = admin.list_topics(topic, timeout=5).topics[topic].partitions
                return len(partitions) == 2 and all(len(p.isrs) == 2 for p in partitions.values())

            wait_for(isrs_full, timeout_s=60, what="both ISRs full: each broker follows the other over OAUTHBEARER")

            token_file = tmp_path / "token.jwt"
            token_file.write_text(unsecured_token("alice"))
            logins = {
                "unsecured": f"sasl.jaas.config={JAAS}\n",
                "token file": (
                    "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;\n"
                    "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
                    f"sasl.oauthbearer.token.endpoint.url={token_file.as_uri()}\n"
                ),
            }
            for name, login in logins.items():
                config = tmp_path / f"{name.replace(' ', '-')}.properties"
                config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n" + login)
                for broker_id in (0, 5):
                    done = subprocess.run(
                        [sys.executable, "-m", "odradek", "topics", "--bootstrap-server", f"127.0.0.1:{ports[broker_id][1]}", "--command-config", str(config), "--list"],
                        capture_output=True, text=True, timeout=60,
                    )
                    assert done.returncode == 0 and topic in done.stdout.split(), (name, broker_id, done.stdout + done.stderr)
            token_file.write_text("not-a-token")
            refused = subprocess.run(
                [sys.executable, "-m", "odradek", "topics", "--bootstrap-server", f"127.0.0.1:{ports[0][1]}", "--command-config", str(tmp_path / "token-file.properties"), "--list"],
                capture_output=True, text=True, timeout=60,
            )
            assert refused.returncode != 0 and "invalid_token" in refused.stdout + refused.stderr
    finally:
        kafka.stop()
