"""A group member's host, as `kafka-consumer-groups --describe` shows it, is the client's address."""

import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import Broker


def test_describe_groups_reports_the_members_client_host(tmp_path) -> None:
    with Broker(log_dir=tmp_path, config={"offsets.topic.num.partitions": "1"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("member-host", 1, 1)])["member-host"].result(10)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "hosts", "session.timeout.ms": 6000})
        consumer.subscribe(["member-host"])
        deadline = time.time() + 20
        members = []
        while time.time() < deadline and not members:
            consumer.poll(0.2)
            description = admin.describe_consumer_groups(["hosts"])["hosts"].result(10)
            members = description.members
        consumer.close()
    assert members, "the consumer never joined"
    assert members[0].host == "/127.0.0.1"
