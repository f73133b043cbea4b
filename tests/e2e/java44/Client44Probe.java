import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
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
 * </pre>
 */
public final class Client44Probe {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration POLL = Duration.ofMillis(100);
    private static final long TIMEOUT_MS = 60_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[1];
        switch (args[0]) {
            case "roundtrip" -> roundtrip(bootstrap, args[2], Integer.parseInt(args[3]), args[4], args[5]);
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
}
