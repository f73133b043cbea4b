import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One member of a consumer group using the consumer group protocol (KIP-848, group.protocol=consumer) of the
 * Java client 4.4: it commits synchronously after each batch and prints, as JSON lines, the partitions it is
 * given and revoked, each batch it receives, and "committed" once that batch's offsets are committed. It
 * leaves the group when its standard input closes (a SIGKILL leaves no chance to).
 *
 * Usage: GroupMember bootstrap topic group [instance-id|-] [assignor|-] [consumer|classic]
 */
public final class GroupMember {
    private static final Object OUT = new Object();

    private static void emit(String json) {
        synchronized (OUT) {
            System.out.println(json);
            System.out.flush();
        }
    }

    private static String partitions(Collection<TopicPartition> partitions) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : partitions) out.add(Integer.toString(tp.partition()));
        return "[" + String.join(",", out) + "]";
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args.length > 5 ? args[5] : "consumer");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
        if (args.length > 3 && !args[3].equals("-")) props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[3]);
        if (args.length > 4 && !args[4].equals("-")) props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, args[4]);
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        // Standard input closed: leave after the batch in hand is committed. Not consumer.wakeup(), which
        // would abort a commitSync whose offsets the coordinator may already have taken, so that the batch,
        // committed, would never be reported as such.
        AtomicBoolean leaving = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() != -1) { }
            } catch (Exception ignored) {
            }
            leaving.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        consumer.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                emit("{\"event\":\"revoked\",\"partitions\":" + partitions(revoked) + "}");
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                emit("{\"event\":\"assigned\",\"partitions\":" + partitions(assigned) + "}");
            }
        });
        emit("{\"event\":\"subscribed\"}");
        try {
            while (!leaving.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                List<String> batch = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    batch.add("[" + r.partition() + "," + r.offset() + ",\"" + r.value() + "\"]");
                }
                emit("{\"event\":\"received\",\"records\":[" + String.join(",", batch) + "]}");
                consumer.commitSync();
                emit("{\"event\":\"committed\"}");
            }
        } finally {
            consumer.close();
            emit("{\"event\":\"closed\"}");
        }
    }
}
