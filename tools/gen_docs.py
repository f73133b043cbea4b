"""Render the docs that tables define: docs/configuration.md and docs/protocol.md.

The config tables (``odradek.broker.config``, ``odradek.storage.log_config``) are the one definition of every
key: they parse ``server.properties``, answer DescribeConfigs and write docs/configuration.md. The dispatch
table (``odradek.broker.kafka_apis.HANDLERS``) is what ApiVersions advertises and writes docs/protocol.md.
``tests/tools/test_generated_docs.py`` fails when a committed document is not what this renders.

Usage: ``python -m odradek.tools.gen_docs`` (rewrites both files in docs/)
"""

from __future__ import annotations

from pathlib import Path

from odradek.broker.config import BROKER_CONFIG
from odradek.storage.config_types import ConfigKey
from odradek.storage.log_config import TOPIC_CONFIG


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(key: ConfigKey, extra: str = "") -> str:
    default = key.render(key.default)
    default_text = "null" if default is None else f"`{default}`" if default != "" else '""'
    doc = _cell(key.doc)
    if not key.acted_on:
        doc += " *(accepted for compatibility; odradek does not act on it)*"
    return f"| `{key.name}` | {key.type.name} | {default_text} | {extra}{doc} |"


DOCS = Path(__file__).resolve().parents[1] / "docs"


def render_configuration() -> str:
    lines = [
        "# Configuration",
        "",
        "Generated from the config tables by `python -m odradek.tools.gen_docs`; do not edit by hand.",
        "",
        "## Broker (`server.properties`, `odradek serve --override key=value`)",
        "",
        "Keys as Apache Kafka names them. Unknown keys are warned about at start; invalid values stop the broker",
        "with a message naming the key.",
        "",
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    lines += [_row(k) for k in BROKER_CONFIG]
    lines += [
        "",
        "## Topic (CreateTopics configs, AlterConfigs, IncrementalAlterConfigs)",
        "",
        "A topic's value is its own override if set, else the broker key it falls back to, else the default.",
        "",
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    for key in TOPIC_CONFIG:
        synonyms = getattr(key, "synonyms", ())
        fallback = f"Broker fallback: {', '.join(f'`{s.name}`' for s in synonyms)}. " if synonyms else ""
        lines.append(_row(key, fallback))
    return "\n".join(lines) + "\n"


def render_protocol() -> str:
    from odradek.broker.features import FEATURES
    from odradek.broker.kafka_apis import HANDLERS
    from odradek.protocol.api import APIS

    lines = [
        "# Protocol coverage",
        "",
        "Generated from the dispatch table by `python -m odradek.tools.gen_docs`; do not edit by hand.",
        "",
        "Every API key a Kafka 3.9 or Kafka 4.4 broker listens for is declared in `protocol/messages/`, generated",
        "by `tools/gen_messages.py` from both releases' JSON specs and checked against them",
        "(`tests/protocol/test_spec_crosscheck.py`): all the versions Kafka 3.9 defines, including the old ones",
        "Kafka 4.0 dropped, and the versions and APIs Kafka 4.4 adds (the share-group, streams-group and",
        "share-state APIs, Produce 12-13, EndTxn 5, ...). Where 4.4 adds versions to an API of 3.9, a version up",
        "to 3.9's highest is declared as 3.9's spec has it and a version above as 4.4's has it; the generator",
        "refuses to write anything where the two specs disagree on a version both define. Kafka 4.4's",
        "coordinator records (ConsumerGroup\\*, ShareGroup\\*, ShareSnapshot, ShareUpdate, StreamsGroup\\*) are",
        "declared beside 3.9's.",
        "",
        "Declaring a version serves nothing. The broker serves, and ApiVersions advertises, the versions below,",
        "listed per API in `broker/kafka_apis.py` (by default the versions Kafka 3.9 defines); a request for an",
        "API key or version it does not serve closes the connection, as Kafka does (ApiVersions answers",
        "UNSUPPORTED_VERSION in v0).",
        "",
        "| key | API | served versions | Kafka 3.9 versions | declared versions |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, api in sorted(APIS.items()):
        handler = HANDLERS.get(key)
        served = f"{handler.min_version}-{handler.max_version}" if handler else "not served"
        kafka_3_9 = f"{api.kafka_3_9.low}-{api.kafka_3_9.high}" if api.kafka_3_9.high is not None else "none"
        lines.append(f"| {key} | {api.name} | {served} | {kafka_3_9} | {api.min_version}-{api.max_version} |")
    lines += [
        "",
        "**KIP-951's leader hints** (broker/handlers/leader_hints.py). From Produce v10 and Fetch v16, a partition",
        "refused with NOT_LEADER_OR_FOLLOWER (and, for Fetch, FENCED_LEADER_EPOCH) carries its current leader and",
        "epoch as this broker knows them (`CurrentLeader`, a tagged field), and the answer the leaders' addresses on",
        "the request's listener (`NodeEndpoints`), so that a client moves to the new leader without a Metadata round",
        "trip; Kafka 3.9 gives them in ZooKeeper mode too. A partition this broker does not host is",
        "NOT_LEADER_OR_FOLLOWER while the metadata has it (UNKNOWN_TOPIC_OR_PARTITION only when it exists nowhere), a",
        "Fetch v13+ resolves topic ids with the whole metadata, any negative `CurrentLeaderEpoch` in a Fetch counts",
        "as none, and the leader epoch is checked before the leadership, all as Kafka's ReplicaManager and Partition",
        "do. The multi-process broker's internal Produce answer (broker/network/forwarded_produce.py) carries the",
        "hints to the front. tests/controller/test_replica_routing_cluster.py asks the same of odradek and Kafka",
        "3.9.1 clusters. A v11+ consumer's Fetch of a partition the broker follows is served (KIP-392,",
        "docs/replication.md), so it gets no hint.",
        "",
        "## Features",
        "",
        "ApiVersions (v3+) reports the features listed in `broker/features.py` (KIP-584), which Kafka 4.x clients",
        "go by (`transaction.version` for transactions v2, `group.version` for the consumer group protocol) and",
        "`kafka-features.sh describe` prints. Kafka finalizes features only in KRaft mode (a ZooKeeper-mode Kafka",
        "3.9 finalizes none); odradek finalizes these at fixed levels: on a single node at the",
        "levels of the table below, with epoch 0. In ZooKeeper mode a feature level is finalized, as Kafka does,",
        "cluster-wide and only where every broker supports it: each odradek broker registers its supported levels",
        "in `/brokers/ids/<id>` (the `features` map of the v5 registration, `min_version`/`max_version`, as",
        "Kafka's `BrokerIdZNode` writes it), watches the registrations and finalizes each feature at the highest",
        "level up to the table's that every live broker registers. Kafka 3.9's brokers register no features, so",
        "beside one nothing is finalized and a 4.x client keeps to transactions v1 and the classic group",
        "protocol. The epoch is the child version of `/brokers/ids` when the levels last changed (Kafka's is the",
        "`/feature` znode's version): it grows with every change and never goes back.",
        "`transaction.version` 2 is transactions v2 (KIP-890 part 2): EndTxn v5 bumps the producer epoch, Produce",
        "v12 and TxnOffsetCommit v5 add their partition to the transaction (docs/transactions.md).",
        "",
        "UpdateFeatures (`kafka-features.sh upgrade`) is answered as a Kafka 3.9 ZooKeeper-mode broker answers it:",
        "ALTER on the cluster, the active controller's only, and INVALID_REQUEST with Kafka's message for a feature",
        "odradek does not finalize (Kafka's: every feature). An update to the level odradek has finalized is",
        "answered NONE and changes nothing; any other level is refused: the levels are fixed. Envelope is",
        "advertised as by Kafka 3.9 and, forwarding never being enabled, closes the connection that sends one.",
        "",
    ]
    if FEATURES:
        lines += ["| feature | supported levels | finalized level |", "| --- | --- | --- |"]
        lines += [f"| {f.name} | {f.min_version}-{f.max_version} | {f.level} |" for f in FEATURES]
    else:
        lines.append("None yet: no supported or finalized features, and finalized features epoch -1.")
    lines += ["", *CONSUMER_GROUP_PROTOCOL]
    lines += SHARE_GROUPS
    return "\n".join(lines) + "\n"


CONSUMER_GROUP_PROTOCOL = """\
## The consumer group protocol (KIP-848)

ConsumerGroupHeartbeat and ConsumerGroupDescribe are served by the group coordinator
(`broker/coordinator/group/consumer_group_manager.py`) in single-node and ZooKeeper mode alike; Kafka serves
them only in KRaft mode. The Java client 4.x and librdkafka with `group.protocol=consumer` consume as a group,
and Kafka 4.4's `kafka-consumer-groups.sh --describe` shows the group (members, current and target
assignments, epochs, assignor), as against Kafka 4.4 (tests/e2e/test_consumer_group_protocol.py). Over three
brokers a group goes on at its new coordinator when its coordinator's broker is killed, nothing lost and
nothing committed twice, as on a three-node Kafka 4.4 (tests/controller/test_consumer_group_failover_cluster.py).

The coordinator follows Kafka's `GroupMetadataManager.consumerGroupHeartbeat`: a changed subscription, or a
change in the subscribed topics (created, deleted, more partitions), bumps the group epoch; the server-side
assignor (`group.consumer.assignors`: `uniform` first, then `range`; a member may ask for one with
`group.remote.assignor`) computes the target assignment; each heartbeat moves a member one step towards it,
revoking partitions before another member gets them (UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS). Members
are fenced after `group.consumer.session.timeout.ms` (45000) without a heartbeat and when they do not revoke
within their rebalance timeout; they heartbeat every `group.consumer.heartbeat.interval.ms` (5000). A group's
`consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` (GROUP config resources) take their place
for it, within `group.consumer.min/max.session.timeout.ms` and `group.consumer.min/max.heartbeat.interval.ms`,
which also bound the broker's own values at start-up with Kafka's messages. Static
members (`group.instance.id`) leave with epoch -2 and get their assignment back when they rejoin;
`group.consumer.max.size` bounds a group (GROUP_MAX_SIZE_REACHED). Errors are Kafka's: FENCED_MEMBER_EPOCH,
UNKNOWN_MEMBER_ID, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
INVALID_REQUEST. Offsets commit (OffsetCommit v9+) and fetch (OffsetFetch v9+) at the member's epoch
(STALE_MEMBER_EPOCH); as in Kafka 4.3+ (KIP-1251) a commit may also carry an older epoch for partitions the
member has owned since that epoch (the epoch each partition was given at is kept, and written as the
record's AssignmentEpochs), which a commit sent while the member's heartbeat is in flight does. Offsets of
the topics a group with members subscribes to do not expire.

The group's state is Kafka 4.4's records in `__consumer_offsets` (ConsumerGroupMetadata with the group
epoch, ConsumerGroupMemberMetadata, ConsumerGroupTargetAssignmentMetadata/Member,
ConsumerGroupCurrentMemberAssignment, ConsumerGroupRegularExpression): a restarted or moved coordinator
loads the group and its members carry on at their epochs. ListGroups lists such a group with type
`consumer`; DescribeGroups shows it Dead, and ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND for a classic
group, as Kafka does.

Classic and consumer-protocol members share a group as in Kafka 4.x (KIP-848's online migration,
`broker/coordinator/group/consumer_group_manager.py` after Kafka's `GroupMetadataManager`): an empty group of
either kind is converted when a member of the other protocol joins it, whatever the policy; a non-empty one
as `group.consumer.migration.policy` allows (`bidirectional`, Kafka's default; `upgrade`, `downgrade`,
`disabled`). Upgrade: a ConsumerGroupHeartbeat joining a classic group of consumers (protocol type
`consumer`, at most `group.consumer.max.size` members) converts it into a consumer group at its generation,
each classic member keeping the partitions its last assignment gave it (the GroupMetadata tombstone, then
the ConsumerGroup* records, ConsumerGroupMemberMetadata with its ClassicMemberMetadata: session timeout and
protocols); members parked in JoinGroup/SyncGroup are answered REBALANCE_IN_PROGRESS. Classic members of a
consumer group are served through JoinGroup (answered at once, with no leader and no member list: the broker
assigns; MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED and INCONSISTENT_GROUP_PROTOCOL as Kafka), SyncGroup (their
assigned partitions as a ConsumerProtocolAssignment at their subscription's version), Heartbeat
(REBALANCE_IN_PROGRESS when the group epoch passed theirs, they have partitions to revoke or their unreleased
ones are free, and then they must rejoin within their rebalance timeout) and LeaveGroup; they commit at their
member epoch (ILLEGAL_GENERATION otherwise) and ConsumerGroupDescribe gives them MemberType 0. Downgrade: when
the last consumer-protocol member leaves or is fenced and classic members remain (at most `group.max.size`),
the consumer group's records are deleted and a classic group at the group epoch is written (GroupMetadata, each
member with its target assignment), which then rebalances; when a classic static member takes the place of
the last consumer-protocol member (its instance id), it takes its assignment too and the classic group stays
Stable. Offsets stay with the group throughout.
tests/e2e/test_consumer_group_protocol.py rolls Java 4.4 consumers from classic to `group.protocol=consumer`
and back against odradek and Kafka 4.4, nothing lost or committed twice. With the policy not allowing it, a
heartbeat under the id of a classic group with members gets GROUP_ID_NOT_FOUND. One difference: a classic
member's LeaveGroup to a consumer group is answered when its records are decided, not once they are written
(the classic LeaveGroup path answers at once); a failed write puts the group back as it was.

Differences from Kafka 4.4:

- Regular expressions (`SubscribedTopicRegex`, Java's `subscribe(SubscriptionPattern)`) are Python's `re`,
  matched against every topic's whole name as RE2/J's `matches()` (internal topics included, as Kafka). Kafka
  keeps only the topics the member's principal may DESCRIBE; odradek does not filter them. Literals,
  `.`, classes, `\\d`, `\\w`, `\\s`, quantifiers, alternation, groups and anchors mean the same. RE2/J
  refuses backreferences and lookarounds, which Python accepts; RE2/J's `\\Q...\\E` and `\\p{...}` classes
  are refused by Python (INVALID_REGULAR_EXPRESSION). A regex is resolved when a heartbeat needs it, again
  at most every 10 s (Kafka resolves in the background after metadata changes); its record's `Version` is 0.
- The group epoch's `MetadataHash` is odradek's own 64-bit hash of the subscribed topics (name, id,
  partition count), not KIP-1101's: a Kafka 4.4 that loads odradek's records rebalances the group once.
- `uniform` with members subscribed to different topics balances and keeps partitions where it can, but is
  not Kafka's `UniformHeterogeneousAssignmentBuilder` move for move. Rack-aware assignment is not done
  (`RackId` is kept and described only).
- In a mixed cluster with Kafka 3.9 brokers, a group whose coordinator is a Kafka 3.9 broker stays
  classic: that broker does not serve ConsumerGroupHeartbeat, and a client with `group.protocol=consumer`
  fails with "The cluster does not support the new CONSUMER group protocol".
""".splitlines()


SHARE_GROUPS = [
    "",
    "## Share groups (KIP-932, queues for Kafka)",
    "",
    "Served: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and ShareAcknowledge (v2: the record-limit",
    "acquire mode and RENEW acknowledgements), Describe/Alter/DeleteShareGroupOffsets, and share groups in",
    "ListGroups v5.",
    "Kafka 4.4 serves them only in KRaft mode with `share.version` finalized; odradek serves them in",
    "single-node and ZooKeeper mode alike, and finalizes `share.version` 2 as a fresh Kafka 4.4 cluster does",
    "(`kafka-features.sh describe` prints the same line); a ZooKeeper cluster only while every registered",
    "broker supports it (a Kafka 3.9 broker supports none: level 0, not listed, and Kafka 4.4's",
    "`KafkaShareConsumer` still uses the APIs, which it chooses by version). tests/e2e/test_share_groups.py",
    "runs Kafka 4.4's own share consumer against odradek and a Kafka 4.4 KRaft node side by side: every record",
    "delivered and accepted once, two consumers sharing a partition, RELEASE and an expired acquisition lock",
    "redelivering with a higher delivery count, a killed consumer's records coming back when its connection",
    "closes, `group.share.delivery.count.limit` archiving, the state",
    "surviving a restart, the share-state RPCs (summary and read of a consumed partition and of one never",
    "consumed, the leader-epoch fence, unknown topic, negative partition, empty group id) answered alike,",
    "`kafka-share-groups.sh --list`, `--describe` (start offset and lag), `--delete`,",
    "`--reset-offsets` and `--delete-offsets`, and group configs (`kafka-configs.sh --entity-type groups`).",
    "",
    "How: the share partition (`broker/share/share_partition.py`) keeps in-flight records as runs of offsets",
    "in one state (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED) and acquires whole fetched batches, as Kafka;",
    "a ShareFetch answer carries the log's batches as stored, from the one holding the first acquired offset",
    "to the last one starting at or before the last acquired offset (Kafka 4.4's",
    "`ShareFetchUtils.maybeSliceFetchRecords`), read from their headers alone and sent as slices of the",
    "segment files with sendfile, as a Fetch answer's records are (read and copied over TLS); unlike Kafka,",
    "a partial batch cut by the fetch's byte limit at the end of the read is left out rather than sent;",
    "the share coordinator keeps each share partition's state in `__share_group_state` as Kafka 4.4's",
    "ShareSnapshot and ShareUpdate records (Kafka's `kafka-dump-log.sh --share-group-state-decoder` reads",
    "them); membership and the simple assignor are in `broker/coordinator/group/share_groups.py`.",
    "",
    "Differences from Kafka 4.4, and what is not served yet:",
    "",
    "- Group configs (GROUP config resources, type 32, in DescribeConfigs, IncrementalAlterConfigs and the legacy",
    "  AlterConfigs, as Kafka 4.4 accepts them in all three; `broker/group_config.py`) are served with Kafka",
    "  4.4's keys, values in force (the group's override, else its broker key's, with that key's source),",
    "  checks and refusals (INVALID_CONFIG with Kafka's messages; an APPEND or SUBTRACT refused for every group",
    "  key, as Kafka's controller does). Kafka keeps them in its KRaft metadata log; odradek keeps them with",
    "  the rest of its cluster metadata: the embedded controller's metadata file, and in ZooKeeper mode",
    "  `/config/groups/<group>` with a `/config/changes` notification every odradek broker follows (a Kafka 3.9",
    "  broker of a mixed cluster logs an error for that notification, whose entity type it does not know, and",
    "  goes on). What takes",
    "  effect: a share partition created after the change starts where `share.auto.offset.reset` says",
    "  (`earliest`, `latest`, `by_duration:<ISO-8601>`) and runs with the group's",
    "  `share.record.lock.duration.ms`, `share.delivery.count.limit` and `share.partition.max.record.locks`;",
    "  `share.isolation.level` applies at the next fetch. Differences: a share partition already running keeps",
    "  the lock duration and limits it was created with (Kafka reads them at each acquisition); the",
    "  `share.session.timeout.ms`/`heartbeat.interval.ms`, the `consumer.*` keys but `consumer.session.timeout.ms`",
    "  and `consumer.heartbeat.interval.ms` (which the consumer group coordinator uses), `streams.*` and",
    "  `errors.deadletterqueue.*` keys are checked, stored and described but not acted on; the bounds",
    "  odradek's broker table lacks (`group.share.max.delivery.count.limit`, the streams group's...) are fixed",
    "  at Kafka 4.4's defaults; configs are listed in table order, not Kafka's hash order; a group's configs",
    "  stay when the group is deleted. ListConfigResources (v1; v0 is ListClientMetricsResources) lists the",
    "  groups with configs, so `kafka-configs.sh --describe --entity-type groups` without `--entity-name`",
    "  describes each; it lists no client metrics resources (KIP-714 is not served).",
    "- Share group membership is kept in memory, not as ShareGroup\\* records in `__consumer_offsets`: after",
    "  the coordinator restarts or moves, members hear UNKNOWN_MEMBER_ID and join again (their records' state",
    "  is in `__share_group_state` and survives). The simple assignor recomputes from scratch (Kafka's is",
    "  sticky); partitions are shared round-robin when members outnumber them.",
    "- The share-state RPCs between brokers (InitializeShareGroupState v0, ReadShareGroupState v0,",
    "  WriteShareGroupState v0-1, DeleteShareGroupState v0, ReadShareGroupStateSummary v0-1, Kafka 4.4's",
    "  versions; `broker/handlers/share_group_state.py`) are served by the share coordinator with Kafka's",
    "  answers: CLUSTER_ACTION needed, NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST for a",
    "  negative partition and for a ReadShareGroupState of a key never written (\"Read operation on",
    "  uninitialized share partition not allowed.\"; its summary says start offset -1), FENCED_LEADER_EPOCH",
    "  for a leader epoch below one the coordinator saw read or write, FENCED_STATE_EPOCH below the state's,",
    "  UNKNOWN_TOPIC_OR_PARTITION, no results for an empty group id. A share-partition leader reaches its",
    "  keys' coordinators through a persister (`broker/share/persister.py`, Kafka's `DefaultStatePersister`):",
    "  the local share coordinator, or another broker's over the inter-broker listener, retrying",
    "  NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and lost connections with a",
    "  backoff (100 ms doubling to 1 s) for 15 s, then failing the acknowledgement that waited for it; the",
    "  calls of one key go one at a time, in order. A share partition reads its state with the data",
    "  partition's leader epoch and writes with it, and is dropped when fenced (its next fetch reads again).",
    "  A write that failed makes the share partition's next write carry its whole state. DescribeShareGroupOffsets",
    "  reads each partition's summary from its coordinator, wherever it is, and computes the lag from the",
    "  partition's high watermark at its leader, as Kafka 4.4's partition metadata client does (KIP-1226;",
    "  `broker/share/partition_metadata_client.py`): its own for a partition it leads, else ListOffsets LATEST",
    "  (as a consumer, so the high watermark) to the leader over the inter-broker listener, batched per",
    "  leader; a partition without a live leader, or whose leader cannot answer, gets lag -1",
    "  (tests/controller/test_share_group_lag_cluster.py: two brokers, one partition on each,",
    "  `kafka-share-groups.sh --describe`). Asked for no topics, it answers the topics the group's members",
    "  subscribe to and every topic where the group has state: Kafka's group coordinator remembers the topics",
    "  it initialized (ShareGroupStatePartitionMetadata records); odradek's does not, so it reads every other",
    "  topic's state from its coordinator and answers the partitions that have some. FindCoordinator's key type 2 is not",
    "  served (only brokers use it; odradek's find the coordinator from their metadata). ShareFetch does not",
    "  check its member id against the group, as Kafka 4.4 does not: once a member has heartbeated, a member",
    "  id the group never saw acquires records too; where none ever heartbeated, Kafka 4.4 answers the",
    "  partition UNKNOWN_SERVER_ERROR (its share partition cannot read a state never initialized) and odradek",
    "  NONE with no records (tests/e2e/test_share_groups.py). In a ZooKeeper",
    "  cluster the share state survives its share coordinator's broker being killed while consumers consume:",
    "  tests/controller/test_share_group_failover_cluster.py kills the coordinator of a share partition led",
    "  by another broker, on three odradek brokers and on a three-node Kafka 4.4 KRaft cluster alike, and",
    "  checks that no record whose acknowledgement was confirmed is delivered again, every record is",
    "  delivered, and the group ends with no lag.",
    "- `kafka-share-groups.sh` works: `--list` (ListGroups v5 lists share groups with type `share`),",
    "  `--describe` (offsets, `--members`, `--state`), `--delete` (DeleteGroups of an empty share group, its",
    "  state tombstoned in `__share_group_state` without waiting for the writes), `--reset-offsets`",
    "  (AlterShareGroupOffsets: each partition's state replaced by a ShareSnapshot of the new start offset with",
    "  nothing in flight, a negative offset making it uninitialized; a group that does not exist is made, as",
    "  Kafka does) and `--delete-offsets` (DeleteShareGroupOffsets: the topic's state tombstoned). Both need an",
    "  empty group (NON_EMPTY_GROUP) and answer once the share coordinator wrote the change. A share group the",
    "  coordinator forgot (a restart: membership is in memory) is GROUP_ID_NOT_FOUND to DeleteGroups; to",
    "  Alter/DeleteShareGroupOffsets it is found while `__share_group_state` holds state of it.",
    "- The records odradek writes to `__share_group_state` follow Kafka's rules (a snapshot first and every",
    "  `share.coordinator.snapshot.update.records.per.snapshot` updates, the start offset persisted before it",
    "  moves past acknowledged records) but not always Kafka's sequence: Kafka's group coordinator first",
    "  initializes a partition's state (InitializeShareGroupState) with start offset -1 at the group's epoch as",
    "  state epoch, so ReadShareGroupState(Summary) there shows a state epoch such as 2; odradek's share",
    "  partition reads the state, finds it uninitialized and writes the start offset it starts at, with state",
    "  epoch 0. A reset (AlterShareGroupOffsets) initializes the state at its state epoch plus one, as Kafka's",
    "  group coordinator does, so that the share partition its leader keeps is fenced at its next write and",
    "  reads the new state. DeleteShareGroupOffsets tombstones the state without such a fence: in a cluster, a",
    "  share partition another broker leads and still keeps in memory writes its state again (Kafka's group",
    "  coordinator tracks which partitions it initialized; odradek's does not). Writes carry",
    "  DeliveryCompleteCount -1: the coordinator counts it.",
]
"""What docs/protocol.md says of share groups: what is served, and what is not yet."""


RENDERERS = {"configuration.md": render_configuration, "protocol.md": render_protocol}


def main() -> None:
    for name, render in RENDERERS.items():
        (DOCS / name).write_text(render())


if __name__ == "__main__":
    main()
