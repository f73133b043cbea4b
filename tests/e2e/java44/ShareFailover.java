import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Kafka 4.4 share consumers that keep consuming while brokers die, for
 * tests/controller/test_share_group_failover_cluster.py. Each consumer ACCEPTs every record it is delivered and
 * commits (commitSync) after each poll; the lines, in one global order:
 *   {"c": consumer, "delivered": [[value, partition, delivery count], ...]}
 *   {"c": consumer, "acked": [[value, delivery count], ...]}     the broker confirmed the acknowledgement
 *   {"c": consumer, "failed": [[value, delivery count], ...], "error": "..."}   it did not (may be redelivered)
 *   {"c": consumer, "error": "..."}                             a poll failed; the consumer goes on
 *
 * usage: ShareFailover BOOTSTRAP TOPIC GROUP CONSUMERS STOP_FILE TIMEOUT_MS -- runs until STOP_FILE exists.
 */
public final class ShareFailover {
    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String pairs(List<String> items) {
        return "[" + String.join(", ", items) + "]";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int consumers = Integer.parseInt(args[3]);
        Path stopFile = Path.of(args[4]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[5]);
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        for (int c = 0; c < consumers; c++) {
            final int index = c;
            Thread t = new Thread(() -> {
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("group.id", group);
                p.put("client.id", "share-failover-" + index);
                p.put("key.deserializer", StringDeserializer.class.getName());
                p.put("value.deserializer", StringDeserializer.class.getName());
                p.put("share.acknowledgement.mode", "explicit");
                p.put("max.poll.records", "50");
                try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p)) {
                    consumer.subscribe(List.of(topic));
                    while (!Files.exists(stopFile) && System.currentTimeMillis() < deadline) {
                        List<ConsumerRecord<String, String>> got = new ArrayList<>();
                        try {
                            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) got.add(r);
                        } catch (KafkaException e) {
                            emit("{\"c\": " + index + ", \"error\": " + quote(e.toString()) + "}");
                            continue;
                        }
                        if (got.isEmpty()) continue;
                        List<String> delivered = new ArrayList<>();
                        for (ConsumerRecord<String, String> r : got) {
                            delivered.add("[" + quote(r.value()) + ", " + r.partition() + ", " + r.deliveryCount().map(Short::intValue).orElse(-1) + "]");
                            consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        emit("{\"c\": " + index + ", \"delivered\": " + pairs(delivered) + "}");
                        Map<TopicIdPartition, Optional<KafkaException>> results;
                        String failure = null;
                        try {
                            results = consumer.commitSync(Duration.ofSeconds(30));
                        } catch (KafkaException e) {
                            results = Map.of();
                            failure = e.toString();
                        }
                        List<String> acked = new ArrayList<>();
                        List<String> failed = new ArrayList<>();
                        for (ConsumerRecord<String, String> r : got) {
                            String item = "[" + quote(r.value()) + ", " + r.deliveryCount().map(Short::intValue).orElse(-1) + "]";
                            Optional<KafkaException> outcome = null;
                            for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : results.entrySet()) {
                                if (e.getKey().partition() == r.partition() && e.getKey().topic().equals(r.topic())) outcome = e.getValue();
                            }
                            if (outcome != null && outcome.isEmpty()) {
                                acked.add(item);
                            } else {
                                failed.add(item);
                                if (failure == null) failure = outcome == null ? "no result for the partition" : outcome.get().toString();
                            }
                        }
                        if (!acked.isEmpty()) emit("{\"c\": " + index + ", \"acked\": " + pairs(acked) + "}");
                        if (!failed.isEmpty()) emit("{\"c\": " + index + ", \"failed\": " + pairs(failed) + ", \"error\": " + quote(failure) + "}");
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) t.join();
        for (Throwable e : failures) e.printStackTrace();
        emit("{\"stopped\": true, \"failures\": " + failures.size() + "}");
        System.exit(failures.isEmpty() ? 0 : 1);
    }
}
