import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java producer over SASL for a while, one record every 100 ms, then what it observed as one JSON
 * line: records acknowledged, and its network metrics (connections made, authentications and
 * re-authentications). Arguments: bootstrap, security protocol, mechanism and JAAS config (both empty
 * without SASL), seconds (counted from the first acknowledgement), topic, then more client settings as
 * key=value (TLS stores).
 *
 * <p>The tests but test_gssapi's run it in a runner JVM that stays up (tests/jvm/ToolRunner.java), one run
 * after another: it keeps no state between runs, closes its producer before main returns and never calls
 * System.exit.
 */
public final class SecurityProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put("security.protocol", args[1]);
        if (!args[2].isEmpty()) {
            props.put("sasl.mechanism", args[2]);
            props.put("sasl.jaas.config", args[3]);
        }
        for (int a = 6; a < args.length; a++) {
            String[] kv = args[a].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        long seconds = Long.parseLong(args[4]);
        String topic = args[5];
        int acked = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            int i = 0;
            long until = Long.MAX_VALUE;
            while (System.currentTimeMillis() < until) {
                Future<RecordMetadata> sent = producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
                sent.get();
                acked++;
                i++;
                if (acked == 1) {
                    until = System.currentTimeMillis() + seconds * 1000;  // from the first acknowledgement (the topic exists)
                }
                Thread.sleep(100);
            }
            StringBuilder json = new StringBuilder("{\"acked\": " + acked);
            for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
                MetricName name = e.getKey();
                if (name.group().equals("producer-metrics") && (name.name().endsWith("authentication-total") || name.name().equals("connection-creation-total"))) {
                    json.append(", \"").append(name.name()).append("\": ").append(((Number) e.getValue().metricValue()).longValue());
                }
            }
            System.out.println(json.append("}"));
        }
    }
}
