import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's own Java client (kafka-clients 3.9.1) driven through one scenario per sub-command, for
 * tests/e2e/test_java_client.py. It prints what the client observed, one JSON object per line, and leaves
 * every judgement to the Python test; a client call that fails unexpectedly ends the program non-zero.
 *
 * <pre>
 *   produce BOOTSTRAP TOPIC COUNT CODEC...  the idempotent producer (the client's defaults), once per
 *                                          compression codec, then a read-back
 *   group   BOOTSTRAP TOPIC GROUP COUNT ASSIGNOR  two group members in one thread, then one leaves
 *   admin   BOOTSTRAP TOPIC              the AdminClient over a topic's life and a group's offsets
 *   transactions BOOTSTRAP TOPIC         a transactional producer's commits and abort, a zombie fenced by its
 *                                          successor, then read_committed and read_uncommitted read-backs
 * </pre>
 *
 * <p>It runs in a runner JVM that stays up (tests/jvm/ToolRunner.java), one run after another: it keeps no
 * state between runs, closes its clients before main returns and never calls System.exit.
 */
public final class ClientProbe {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration POLL = Duration.ofMillis(100);
    private static final long TIMEOUT_MS = 30_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[1];
        switch (args[0]) {
            case "produce" -> produce(bootstrap, args[2], Integer.parseInt(args[3]), List.of(args).subList(4, args.length));
            case "group" -> group(bootstrap, args[2], args[3], Integer.parseInt(args[4]), args[5]);
            case "admin" -> admin(bootstrap, args[2]);
            case "transactions" -> transactions(bootstrap, args[2]);
            default -> throw new IllegalArgumentException("unknown sub-command " + args[0]);
        }
    }

    /** One JSON line: {"step": step, key: value, ...}. */
    private static void emit(String step, Object... keyValues) throws Exception {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("step", step);
        for (int i = 0; i < keyValues.length; i += 2) {
            line.put((String) keyValues[i], keyValues[i + 1]);
        }
        System.out.println(JSON.writeValueAsString(line));
        System.out.flush();
    }

    private static Properties clientProperties(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return props;
    }

    /** A producer with the client's defaults (enable.idempotence=true, acks=all) and small batches, so many
     * batches are in flight at once and the broker must keep each one's sequence numbers in order. */
    private static KafkaProducer<String, String> producer(String bootstrap, Map<String, String> overrides) {
        Properties props = clientProperties(bootstrap);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "2048");
        props.putAll(overrides);
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    private static KafkaConsumer<String, String> consumer(String bootstrap, String groupId, String clientId, Map<String, String> overrides) {
        Properties props = clientProperties(bootstrap);
        if (groupId != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        }
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "200");  // a member learns of a rebalance at its next heartbeat
        props.putAll(overrides);
        return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    /** Sends key-i/value-i for i in [from, from + count) and returns [i, partition, offset] per record. */
    private static List<List<Object>> send(KafkaProducer<String, String> producer, String topic, int from, int count) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (int i = from; i < from + count; i++) {
            futures.add(producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)));
        }
        producer.flush();
        List<List<Object>> acked = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            RecordMetadata meta = futures.get(i).get();
            acked.add(List.of(from + i, meta.partition(), meta.offset()));
        }
        return acked;
    }

    private static List<Object> describe(ConsumerRecord<String, String> r) {
        return List.of(r.partition(), r.offset(), r.key(), r.value());
    }

    /** One idempotent producer per compression codec, each sending count records, then one read-back. */
    private static void produce(String bootstrap, String topic, int count, List<String> codecs) throws Exception {
        for (int i = 0; i < codecs.size(); i++) {
            try (KafkaProducer<String, String> producer = producer(bootstrap, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codecs.get(i)))) {
                emit("acked", "compression", codecs.get(i), "records", send(producer, topic, i * count, count));
            }
        }
        int total = count * codecs.size();
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, null, "read-back", Map.of())) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                .map(p -> new TopicPartition(topic, p.partition())).toList();
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            List<List<Object>> consumed = new ArrayList<>();
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (consumed.size() < total && System.currentTimeMillis() < deadline) {
                consumer.poll(POLL).forEach(r -> consumed.add(describe(r)));
            }
            consumer.poll(Duration.ofMillis(500)).forEach(r -> consumed.add(describe(r)));  // anything beyond total
            emit("consumed", "records", consumed);
        }
    }

    /** Values sent to partition 0 of topic in one transaction, committed or aborted. */
    private static void transaction(KafkaProducer<String, String> producer, String topic, boolean commit, String... values) throws Exception {
        producer.beginTransaction();
        for (String value : values) {
            producer.send(new ProducerRecord<>(topic, 0, null, value)).get();
        }
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
    }

    /** Two commits around an abort; then a second producer with the same transactional.id fences the first,
     * whose next send fails; then what each isolation level reads of partition 0 up to its end. */
    private static void transactions(String bootstrap, String topic) throws Exception {
        Map<String, String> transactional = Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "txn-" + topic);
        try (KafkaProducer<String, String> producer = producer(bootstrap, transactional)) {
            producer.initTransactions();
            transaction(producer, topic, true, "c1", "c2", "c3");
            transaction(producer, topic, false, "a1", "a2");
            transaction(producer, topic, true, "c4");
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "zombie")).get();
            try (KafkaProducer<String, String> successor = producer(bootstrap, transactional)) {
                successor.initTransactions();  // aborts the zombie's open transaction and bumps the epoch
                try {
                    producer.commitTransaction();
                    emit("zombie", "fenced", false);
                } catch (ProducerFencedException e) {
                    emit("zombie", "fenced", true);
                }
                transaction(successor, topic, true, "c5");
            }
        }
        TopicPartition partition = new TopicPartition(topic, 0);
        long highWatermark;
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, null, "read_uncommitted", Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted"))) {
            highWatermark = consumer.endOffsets(List.of(partition)).get(partition);
        }
        for (String isolation : List.of("read_committed", "read_uncommitted")) {
            try (KafkaConsumer<String, String> consumer = consumer(bootstrap, null, isolation, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
                consumer.assign(List.of(partition));
                consumer.seekToBeginning(List.of(partition));
                long end = consumer.endOffsets(List.of(partition)).get(partition);
                long deadline = System.currentTimeMillis() + TIMEOUT_MS;
                // Every transaction above is decided, but Kafka writes a commit's markers after it answers
                // EndTxn: its last stable offset may trail the high watermark for a moment. Wait for it.
                while (end < highWatermark && System.currentTimeMillis() < deadline) {
                    Thread.sleep(50);
                    end = consumer.endOffsets(List.of(partition)).get(partition);
                }
                List<String> values = new ArrayList<>();
                while (consumer.position(partition) < end && System.currentTimeMillis() < deadline) {
                    consumer.poll(POLL).forEach(r -> values.add(r.value()));
                }
                emit("read", "isolation", isolation, "end", end, "values", values);
            }
        }
    }

    private static List<Integer> partitionNumbers(Collection<TopicPartition> partitions) {
        return partitions.stream().map(TopicPartition::partition).sorted().toList();
    }

    /** Logs each member's assignment changes as the client's rebalance listener reports them. */
    private static ConsumerRebalanceListener listener(String member) {
        return new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                report("revoked", member, partitions);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                report("assigned", member, partitions);
            }

            private void report(String step, String who, Collection<TopicPartition> partitions) {
                try {
                    emit(step, "member", who, "partitions", partitionNumbers(partitions));
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }
        };
    }

    /** Polls every member in turn (each poll returns within POLL even mid-rebalance), committing what each
     * got, until done holds and expected records arrived, or timeoutMs passed; returns [member, record...]. */
    private static List<List<Object>> pollUntil(Map<String, KafkaConsumer<String, String>> members, BooleanSupplier done, int expected, long timeoutMs) {
        List<List<Object>> consumed = new ArrayList<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!(done.getAsBoolean() && consumed.size() >= expected) && System.currentTimeMillis() < deadline) {
            members.forEach((name, member) -> {
                for (ConsumerRecord<String, String> r : member.poll(POLL)) {
                    List<Object> row = new ArrayList<>(List.of(name));
                    row.addAll(describe(r));
                    consumed.add(row);
                }
                try {
                    member.commitSync();
                } catch (RebalanceInProgressException e) {
                    // Mid-rebalance (cooperative: between its two rounds) a member may not commit; the next
                    // commit after the rebalance covers the same positions, as an application retries.
                }
            });
        }
        return consumed;
    }

    /** Polls until count records arrived, then a second more: a record delivered twice shows up. */
    private static List<List<Object>> consumeRound(Map<String, KafkaConsumer<String, String>> members, int count) {
        List<List<Object>> consumed = pollUntil(members, () -> true, count, TIMEOUT_MS);
        consumed.addAll(pollUntil(members, () -> false, 0, 1000));
        return consumed;
    }

    private static void group(String bootstrap, String topic, String groupId, int count, String assignor) throws Exception {
        Map<String, KafkaConsumer<String, String>> members = new TreeMap<>();
        try (KafkaProducer<String, String> producer = producer(bootstrap, Map.of())) {
            for (String name : List.of("a", "b")) {
                KafkaConsumer<String, String> member = consumer(bootstrap, groupId, "member-" + name,
                    Map.of(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor));
                member.subscribe(List.of(topic), listener(name));
                members.put(name, member);
            }
            int partitions = producer.partitionsFor(topic).size();
            KafkaConsumer<String, String> a = members.get("a"), b = members.get("b");
            BooleanSupplier shared = () -> !a.assignment().isEmpty() && !b.assignment().isEmpty()
                && a.assignment().size() + b.assignment().size() == partitions;
            pollUntil(members, shared, 0, TIMEOUT_MS);
            emit("joined", "a", partitionNumbers(a.assignment()), "b", partitionNumbers(b.assignment()));

            emit("produced", "records", send(producer, topic, 0, count));
            emit("consumed", "round", 1, "records", consumeRound(members, count));

            b.close();  // LeaveGroup: its partitions move to a at a's next poll
            members.remove("b");
            emit("left", "member", "b");
            pollUntil(members, () -> a.assignment().size() == partitions, 0, TIMEOUT_MS);
            emit("handover", "a", partitionNumbers(a.assignment()));

            emit("produced", "records", send(producer, topic, count, count));
            emit("consumed", "round", 2, "records", consumeRound(members, count));
        } finally {
            for (KafkaConsumer<String, String> member : members.values()) {
                member.close();
            }
        }
    }

    /** The class name of the exception a client call failed with, or null when it succeeded. */
    private static String errorOf(Future<?> future) throws InterruptedException {
        try {
            future.get();
            return null;
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        }
    }

    private static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).toList();
    }

    private static Map<String, List<Object>> describeConfigs(Admin admin, ConfigResource resource, String... names) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        Map<String, List<Object>> out = new TreeMap<>();
        for (String name : names) {
            ConfigEntry e = config.get(name);
            out.put(name, List.of(e.value(), e.source().name(), e.isDefault(), e.isReadOnly()));
        }
        return out;
    }

    /** Each spec's [offset, timestamp - base (or the -1 of none), leader epoch]. */
    private static Map<String, List<Object>> listOffsets(Admin admin, TopicPartition tp, Map<String, OffsetSpec> specs, long base) throws Exception {
        Map<String, List<Object>> out = new TreeMap<>();
        for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
            ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec.getValue())).partitionResult(tp).get();
            long timestamp = info.timestamp() < 0 ? info.timestamp() : info.timestamp() - base;
            out.put(spec.getKey(), List.of(info.offset(), timestamp, info.leaderEpoch().orElse(-1)));
        }
        return out;
    }

    private static Map<Integer, List<Object>> groupOffsets(Admin admin, String group) throws Exception {
        Map<Integer, List<Object>> out = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach(
            (tp, om) -> out.put(tp.partition(), List.of(om.offset(), om.metadata())));
        return out;
    }

    private static void admin(String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(clientProperties(bootstrap))) {
            NewTopic newTopic = new NewTopic(topic, 2, (short) 1).configs(Map.of("retention.ms", "3600000"));
            emit("createTopics", "error", errorOf(admin.createTopics(List.of(newTopic)).all()));
            emit("createTopics again", "error", errorOf(admin.createTopics(List.of(newTopic)).all()));
            emit("listTopics", "listed", admin.listTopics().names().get().contains(topic));
            DescribeClusterResult cluster = admin.describeCluster();
            emit("describeCluster", "nodes", ids(new ArrayList<>(cluster.nodes().get())), "controller", cluster.controller().get().id(),
                "clusterIdSet", cluster.clusterId().get() != null);

            TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            emit("describeTopics", "internal", described.isInternal(), "topicIdSet", !Uuid.ZERO_UUID.equals(described.topicId()),
                "partitions", described.partitions().stream().map(p -> List.of(p.partition(), p.leader().id(), ids(p.replicas()), ids(p.isr()))).toList());

            emit("createPartitions", "error", errorOf(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all()));
            emit("createPartitions fewer", "error", errorOf(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all()));
            emit("describeTopics after createPartitions", "partitions",
                admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());

            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            String[] shown = {"retention.ms", "max.message.bytes", "cleanup.policy", "segment.bytes"};
            emit("describeConfigs", "configs", describeConfigs(admin, resource, shown));
            Map<ConfigResource, Collection<AlterConfigOp>> alter = Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE)));
            emit("incrementalAlterConfigs", "error", errorOf(admin.incrementalAlterConfigs(alter).all()));
            Map<ConfigResource, Collection<AlterConfigOp>> invalid = Map.of(resource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)));
            emit("incrementalAlterConfigs invalid", "error", errorOf(admin.incrementalAlterConfigs(invalid).all()));
            emit("describeConfigs after", "configs", describeConfigs(admin, resource, shown));

            // Five records one second apart on partition 0, the first a minute ago.
            long base = System.currentTimeMillis() - 60_000;
            TopicPartition p0 = new TopicPartition(topic, 0);
            try (KafkaProducer<String, String> producer = producer(bootstrap, Map.of())) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, 0, base + i * 1000L, "key-" + i, "value-" + i)));
                }
                for (Future<RecordMetadata> f : sent) {
                    f.get();
                }
            }
            Map<String, OffsetSpec> specs = new TreeMap<>(Map.of(
                "earliest", OffsetSpec.earliest(), "latest", OffsetSpec.latest(), "maxTimestamp", OffsetSpec.maxTimestamp(),
                "forTimestamp base+1500", OffsetSpec.forTimestamp(base + 1500),
                "forTimestamp base", OffsetSpec.forTimestamp(base),
                "forTimestamp after last", OffsetSpec.forTimestamp(base + 10_000)));
            emit("listOffsets", "offsets", listOffsets(admin, p0, specs, base));
            List<ProducerState> producers = admin.describeProducers(List.of(p0)).partitionResult(p0).get().activeProducers();
            emit("describeProducers", "producers", producers.stream().map(ps -> List.of(ps.producerId() >= 0, ps.producerEpoch(),
                ps.lastSequence(), ps.lastTimestamp() - base, ps.currentTransactionStartOffset().orElse(-1))).toList());

            long low = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(3))).lowWatermarks().get(p0).get().lowWatermark();
            emit("deleteRecords", "lowWatermark", low);
            emit("deleteRecords beyond the end", "error",
                errorOf(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(99))).all()));
            emit("listOffsets after deleteRecords", "offsets", listOffsets(admin, p0, specs, base));

            String group = topic + "-group";
            TopicPartition p1 = new TopicPartition(topic, 1);
            emit("alterConsumerGroupOffsets", "error", errorOf(admin.alterConsumerGroupOffsets(group,
                Map.of(p0, new OffsetAndMetadata(4, "first"), p1, new OffsetAndMetadata(0))).all()));
            emit("listConsumerGroupOffsets", "offsets", groupOffsets(admin, group));
            emit("alterConsumerGroupOffsets again", "error", errorOf(admin.alterConsumerGroupOffsets(group,
                Map.of(p0, new OffsetAndMetadata(5, "second"))).all()));
            emit("listConsumerGroupOffsets again", "offsets", groupOffsets(admin, group));
            emit("listConsumerGroups", "listed", admin.listConsumerGroups().all().get().stream().filter(g -> g.groupId().equals(group))
                .map(g -> List.of(g.isSimpleConsumerGroup(), String.valueOf(g.state().orElse(null)))).toList());
            ConsumerGroupDescription groupDescription = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            emit("describeConsumerGroups", "state", groupDescription.state().name(), "members", groupDescription.members().size(),
                "assignor", groupDescription.partitionAssignor(), "simple", groupDescription.isSimpleConsumerGroup(), "coordinator", groupDescription.coordinator().id());
            emit("deleteConsumerGroupOffsets", "error", errorOf(admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all()));
            emit("listConsumerGroupOffsets after deleteConsumerGroupOffsets", "offsets", groupOffsets(admin, group));
            emit("deleteConsumerGroups", "error", errorOf(admin.deleteConsumerGroups(List.of(group)).all()));
            emit("listConsumerGroupOffsets after delete", "offsets", groupOffsets(admin, group));
            emit("deleteConsumerGroups again", "error", errorOf(admin.deleteConsumerGroups(List.of(group)).all()));

            emit("deleteTopics", "error", errorOf(admin.deleteTopics(List.of(topic)).all()));
            emit("listTopics after delete", "listed", admin.listTopics().names().get().contains(topic));
            emit("describeTopics after delete", "error", errorOf(admin.describeTopics(List.of(topic)).allTopicNames()));
        }
    }
}
