import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.Exit;

/**
 * Drives Kafka 4.4's KafkaShareConsumer (KIP-932) for tests/e2e/test_share_groups.py; prints one JSON line
 * per delivery ({"c": consumer, "value", "offset", "dc": delivery count, "ack"}) and a summary line.
 *
 * usage: ShareProbe MODE BOOTSTRAP TOPIC GROUP COUNT CONSUMERS POLICY TIMEOUT_MS
 *   MODE consume: consumers start; warm-up records ("w-*") are produced until one is delivered (the share
 *                 partitions exist from then on, starting at the latest offset), then COUNT records "r-*".
 *   MODE drain:   consumers read what is there (nothing produced) until COUNT real records were accepted.
 *   MODE hold:    one consumer acquires (as consume) and halts the JVM once it holds COUNT records, never
 *                 acknowledging them.
 *   MODE produce: produce COUNT records "p-*".
 *   POLICY accept | release-once (RELEASE at delivery 1, ACCEPT later) | release-always | reject; the consumers
 *   stop once COUNT records were accepted, or every one was delivered and nothing came for 4 s.
 *
 * <p>Every mode but hold also runs in a runner JVM that stays up (tests/jvm/ToolRunner.java), one run after
 * another: a run's state is an instance's, its clients are closed before main returns, and a failed run leaves
 * through Kafka's Exit (which the runner traps), never System.exit. hold halts the JVM it runs in, as a
 * crashed consumer vanishes: it runs in a JVM of its own.
 */
public final class ShareProbe {
    private final Set<String> accepted = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean warm = new AtomicBoolean(false);
    private final Set<String> seen = ConcurrentHashMap.newKeySet();
    private volatile long lastDelivery = System.currentTimeMillis();
    private static final long IDLE_MS = 4000;

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static KafkaProducer<String, String> producer(String bootstrap, int lingerMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", Integer.toString(lingerMs));
        p.put("batch.size", "1024");  // small batches: a share fetch acquires whole batches, so consumers can share
        return new KafkaProducer<>(p);
    }

    private static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, int index) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", "share-probe-" + index);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        p.put("max.poll.records", "50");
        return new KafkaShareConsumer<>(p);
    }

    private static AcknowledgeType decide(String policy, int deliveryCount) {
        switch (policy) {
            case "accept": return AcknowledgeType.ACCEPT;
            case "release-once": return deliveryCount <= 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
            case "release-always": return AcknowledgeType.RELEASE;
            case "reject": return AcknowledgeType.REJECT;
            default: throw new IllegalArgumentException(policy);
        }
    }

    public static void main(String[] args) throws Exception {
        if (!new ShareProbe().run(args)) {
            Exit.exit(1);
        }
    }

    /** One run; false when a consumer failed. */
    private boolean run(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2], group = args[3];
        int count = Integer.parseInt(args[4]), consumers = Integer.parseInt(args[5]);
        String policy = args[6];
        long timeoutMs = Long.parseLong(args[7]);
        long deadline = System.currentTimeMillis() + timeoutMs;

        if (mode.equals("produce")) {
            try (KafkaProducer<String, String> producer = producer(bootstrap, 5)) {
                for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, "p-" + i));
                producer.flush();
            }
            emit("{\"produced\": " + count + "}");
            return true;
        }
        boolean hold = mode.equals("hold");
        boolean produce = mode.equals("consume") || hold;
        if (!produce) warm.set(true);
        AtomicBoolean stop = new AtomicBoolean(false);
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        for (int c = 0; c < consumers; c++) {
            final int index = c;
            Thread t = new Thread(() -> {
                List<String> held = new ArrayList<>();
                try (KafkaShareConsumer<String, String> consumer = consumer(bootstrap, group, index)) {
                    consumer.subscribe(List.of(topic));
                    while (!stop.get() && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                            int dc = r.deliveryCount().map(Short::intValue).orElse(-1);
                            if (r.value().startsWith("w-")) {
                                warm.set(true);
                                consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                                continue;
                            }
                            if (hold) {
                                held.add(r.value());
                                emit("{\"c\": " + index + ", \"value\": " + quote(r.value()) + ", \"offset\": " + r.offset() + ", \"dc\": " + dc + ", \"ack\": \"NONE\"}");
                                if (held.size() >= count) {
                                    emit("{\"held\": " + held.size() + "}");
                                    Runtime.getRuntime().halt(0);
                                }
                                continue;
                            }
                            seen.add(r.value());
                            lastDelivery = System.currentTimeMillis();
                            AcknowledgeType ack = decide(policy, dc);
                            consumer.acknowledge(r, ack);
                            emit("{\"c\": " + index + ", \"value\": " + quote(r.value()) + ", \"offset\": " + r.offset() + ", \"dc\": " + dc + ", \"ack\": " + quote(ack.name()) + "}");
                            if (ack == AcknowledgeType.ACCEPT) accepted.add(r.value());
                        }
                        consumer.commitSync(Duration.ofSeconds(10));
                        if (accepted.size() >= count) stop.set(true);
                        // Nothing is ever accepted: stop once every record came and nothing more did for a while.
                        if (seen.size() >= count && System.currentTimeMillis() - lastDelivery > IDLE_MS) stop.set(true);
                    }
                } catch (Throwable e) {
                    failures.add(e);
                    stop.set(true);
                }
            });
            t.start();
            threads.add(t);
        }
        if (produce) {
            // A holding consumer must get its COUNT records in one poll: in explicit mode the client refuses to poll
            // again while records are unacknowledged (ensureInFlightAcknowledgedIfExplicitAcknowledgement). With
            // 5 ms a loaded machine split them over batches a fetch could return apart; 200 ms keeps them in one.
            try (KafkaProducer<String, String> producer = producer(bootstrap, hold ? 200 : 5)) {
                int w = 0;
                while (!warm.get() && System.currentTimeMillis() < deadline) {
                    producer.send(new ProducerRecord<>(topic, "w-" + w++)).get();
                    Thread.sleep(200);
                }
                for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, "r-" + i));
                producer.flush();
            }
        }
        for (Thread t : threads) t.join();
        for (Throwable e : failures) e.printStackTrace();
        emit("{\"accepted\": " + accepted.size() + ", \"warm\": " + warm.get() + ", \"failures\": " + failures.size() + "}");
        return failures.isEmpty();
    }
}
