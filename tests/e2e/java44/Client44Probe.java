import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java client 4.4.0 driven through one scenario per sub-command, for the tests of Kafka 4.4's APIs
 * (tests/jvm/kafka44_jvm.py compiles it). It prints what the client observed, one JSON object per line, and
 * leaves every judgement to the Python test; a client call that fails unexpectedly ends it non-zero.
 *
 * <pre>
 *   roundtrip BOOTSTRAP TOPIC COUNT GROUP PROTOCOL  the idempotent producer sends COUNT records, then a consumer
 *                                                 of GROUP (group.protocol PROTOCOL: classic or consumer) reads
 *                                                 them back and commits its offsets
 *   transactions BOOTSTRAP TOPIC   a transactional producer's commits and aborts (the state and producer epoch
 *                                  the coordinator describes after each), a zombie fenced by its successor,
 *                                  the partition's producers, read_committed and read_uncommitted read-backs
 *   spread BOOTSTRAP TOPIC         transactions over every partition of TOPIC (commit, abort, commit), the producer
 *                                  epoch described after each, each partition's producers, a read_committed
 *                                  read-back of every partition
 *   timeout BOOTSTRAP TOPIC        a transaction left open past its timeout: the coordinator aborts it, the
 *                                  producer's commit then fails, a new producer goes on
 *   eos BOOTSTRAP IN OUT GROUP     consume-transform-produce: IN's records copied to OUT in transactions that
 *                                  commit the group's offsets too (the first one aborted and redone), then
 *                                  OUT read read_committed
 * </pre>
 *
 * <p>It runs in a runner JVM that stays up (tests/jvm/ToolRunner.java), one run after another: it keeps no
 * state between runs, closes its clients before main returns and never calls System.exit.
 */
public final class Client44Probe {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration POLL = Duration.ofMillis(100);
    private static final long TIMEOUT_MS = 60_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[1];
        switch (args[0]) {
            case "roundtrip" -> roundtrip(bootstrap, args[2], Integer.parseInt(args[3]), args[4], args[5]);
            case "transactions" -> transactions(bootstrap, args[2]);
            case "eos" -> eos(bootstrap, args[2], args[3], args[4]);
            case "spread" -> spread(bootstrap, args[2]);
            case "timeout" -> timeout(bootstrap, args[2]);
            default -> throw new IllegalArgumentException("unknown sub-command " + args[0]);
        }
    }

    /** One JSON line: {"step": step, key: value, ...}. */
    static void emit(String step, Object... keyValues) throws Exception {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("step", step);
        for (int i = 0; i < keyValues.length; i += 2) {
            line.put((String) keyValues[i], keyValues[i + 1]);
        }
        System.out.println(JSON.writeValueAsString(line));
        System.out.flush();
    }

    static KafkaProducer<String, String> producer(String bootstrap, Map<String, String> overrides) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.putAll(overrides);
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, Map<String, String> overrides) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        props.putAll(overrides);
        return new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    private static void roundtrip(String bootstrap, String topic, int count, String group, String protocol) throws Exception {
        List<List<Object>> acked = new ArrayList<>();
        try (KafkaProducer<String, String> producer = producer(bootstrap, Map.of())) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)));
            }
            for (Future<RecordMetadata> future : futures) {
                RecordMetadata meta = future.get();
                acked.add(List.of(meta.partition(), meta.offset()));
            }
        }
        emit("acked", "records", acked);
        Map<String, String> groupConfig = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, groupConfig)) {
            consumer.subscribe(List.of(topic));
            List<List<Object>> consumed = new ArrayList<>();
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (consumed.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    consumed.add(List.of(r.partition(), r.offset(), r.key(), r.value()));
                }
            }
            consumer.commitSync();
            emit("consumed", "records", consumed);
        }
    }

    /** The coordinator's view of a transactional id: its state and producer epoch. */
    private static List<Object> described(Admin admin, String transactionalId) throws Exception {
        TransactionDescription d = admin.describeTransactions(List.of(transactionalId)).description(transactionalId).get();
        return List.of(d.state().toString(), d.producerEpoch());
    }

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

    private static void transactions(String bootstrap, String topic) throws Exception {
        String transactionalId = "txn44-" + topic;
        Map<String, String> transactional = Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
             KafkaProducer<String, String> producer = producer(bootstrap, transactional)) {
            producer.initTransactions();
            emit("init", "described", described(admin, transactionalId));
            transaction(producer, topic, true, "c1", "c2", "c3");
            emit("commit", "described", described(admin, transactionalId));
            transaction(producer, topic, false, "a1", "a2");
            emit("abort", "described", described(admin, transactionalId));
            transaction(producer, topic, true, "c4");
            emit("commit", "described", described(admin, transactionalId));
            producer.beginTransaction();  // an abort with nothing sent
            producer.abortTransaction();
            emit("empty-abort", "described", described(admin, transactionalId));
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "zombie")).get();
            try (KafkaProducer<String, String> successor = producer(bootstrap, transactional)) {
                successor.initTransactions();  // aborts the zombie's open transaction and fences its epoch
                emit("successor", "described", described(admin, transactionalId));
                try {
                    producer.commitTransaction();
                    emit("zombie", "fenced", false);
                } catch (ProducerFencedException e) {
                    emit("zombie", "fenced", true);
                }
                transaction(successor, topic, true, "c5");
                emit("commit", "described", described(admin, transactionalId));
            }
            TopicPartition partition = new TopicPartition(topic, 0);
            List<Object> producers = new ArrayList<>();
            for (ProducerState state : admin.describeProducers(List.of(partition)).partitionResult(partition).get().activeProducers()) {
                producers.add(List.of(state.producerEpoch(), state.currentTransactionStartOffset().orElse(-1L)));
            }
            emit("producers", "epochs", producers);
        }
        TopicPartition partition = new TopicPartition(topic, 0);
        for (String isolation : List.of("read_committed", "read_uncommitted")) {
            try (KafkaConsumer<String, String> consumer = consumer(bootstrap, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
                consumer.assign(List.of(partition));
                consumer.seekToBeginning(List.of(partition));
                long end = consumer.endOffsets(List.of(partition)).get(partition);
                List<String> values = new ArrayList<>();
                long deadline = System.currentTimeMillis() + TIMEOUT_MS;
                while (consumer.position(partition) < end && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                        values.add(r.value());
                    }
                }
                emit("read", "isolation", isolation, "values", values, "end", end);
            }
        }
    }

    /** Copies IN to OUT exactly once: each poll's records go out in a transaction that also commits the
     * group's offsets (TxnOffsetCommit); the first such transaction is aborted and the consumer rewound. */
    private static void eos(String bootstrap, String in, String out, String group) throws Exception {
        int expected = 0;
        try (KafkaConsumer<String, String> probe = consumer(bootstrap, Map.of())) {
            TopicPartition p = new TopicPartition(in, 0);
            expected = probe.endOffsets(List.of(p)).get(p).intValue();
        }
        Map<String, String> transactional = Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "eos44-" + group);
        Map<String, String> consumerConfig = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
            ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        int transactions = 0;
        int aborted = 0;
        try (KafkaProducer<String, String> producer = producer(bootstrap, transactional);
             KafkaConsumer<String, String> consumer = consumer(bootstrap, consumerConfig)) {
            producer.initTransactions();
            consumer.subscribe(List.of(in));
            long copied = 0;
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (copied < expected && System.currentTimeMillis() < deadline) {
                var records = consumer.poll(POLL);
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new java.util.HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(out, 0, r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                transactions++;
                if (aborted == 0) {
                    producer.abortTransaction();
                    aborted++;
                    for (TopicPartition tp : offsets.keySet()) {
                        OffsetAndMetadata committed = consumer.committed(java.util.Set.of(tp)).get(tp);
                        consumer.seek(tp, committed == null ? 0 : committed.offset());
                    }
                    continue;
                }
                producer.commitTransaction();
                copied += records.count();
            }
            TopicPartition p = new TopicPartition(in, 0);
            OffsetAndMetadata committed = consumer.committed(java.util.Set.of(p)).get(p);
            emit("copied", "records", copied, "transactions", transactions, "aborted", aborted, "committed", committed == null ? -1 : committed.offset());
        }
        TopicPartition partition = new TopicPartition(out, 0);
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (consumer.position(partition) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    values.add(r.value());
                }
            }
            emit("out", "values", values);
        }
    }

    private static void spread(String bootstrap, String topic) throws Exception {
        String transactionalId = "spread44-" + topic;
        List<TopicPartition> partitions = new ArrayList<>();
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
             KafkaProducer<String, String> producer = producer(bootstrap, Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId))) {
            producer.partitionsFor(topic).forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
            producer.initTransactions();
            int round = 0;
            for (boolean commit : List.of(true, false, true)) {
                producer.beginTransaction();
                for (TopicPartition tp : partitions) {
                    producer.send(new ProducerRecord<>(topic, tp.partition(), null, "r" + round + "-p" + tp.partition())).get();
                }
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                emit(commit ? "commit" : "abort", "described", described(admin, transactionalId));
                round++;
            }
            List<Object> producers = new ArrayList<>();
            for (TopicPartition tp : partitions) {
                for (ProducerState state : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                    producers.add(List.of(tp.partition(), state.producerEpoch(), state.currentTransactionStartOffset().orElse(-1L)));
                }
            }
            emit("producers", "epochs", producers);
        }
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp)) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    values.add(r.value());
                }
            }
            values.sort(null);
            emit("read", "values", values);
        }
    }

    private static void timeout(String bootstrap, String topic) throws Exception {
        String transactionalId = "timeout44-" + topic;
        Map<String, String> transactional = Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId, ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "2000");
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            try (KafkaProducer<String, String> producer = producer(bootstrap, transactional)) {
                producer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, null, "late")).get();
                emit("open", "described", described(admin, transactionalId));
                long deadline = System.currentTimeMillis() + TIMEOUT_MS;
                while (!described(admin, transactionalId).get(0).equals("CompleteAbort") && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);
                }
                emit("timed-out", "described", described(admin, transactionalId));
                try {
                    producer.commitTransaction();
                    emit("commit", "error", "none");
                } catch (org.apache.kafka.common.KafkaException e) {
                    emit("commit", "error", e.getClass().getSimpleName());
                }
            }
            try (KafkaProducer<String, String> successor = producer(bootstrap, transactional)) {
                successor.initTransactions();
                emit("successor", "described", described(admin, transactionalId));
                transaction(successor, topic, true, "after");
            }
        }
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> consumer = consumer(bootstrap, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (consumer.position(partition) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    values.add(r.value());
                }
            }
            emit("read", "values", values, "end", end);
        }
    }
}
