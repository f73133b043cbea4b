import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.StringJoiner;

/**
 * Replays put/remove/clear lines from stdin on a HashMap<Long, Long>, as Kafka's ProducerStateManager keeps
 * its producers, and prints the map's iteration order at each "order" line (test_hash_map_order.py).
 */
public class HashMapOrderProbe {
    public static void main(String[] args) throws Exception {
        Map<Long, Long> map = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] op = line.split(" ");
            switch (op[0]) {
                case "put": map.put(Long.parseLong(op[1]), 0L); break;
                case "remove": map.remove(Long.parseLong(op[1])); break;
                case "clear": map.clear(); break;
                case "order":
                    StringJoiner keys = new StringJoiner(" ");
                    for (Long key : map.keySet()) keys.add(key.toString());
                    System.out.println(keys);
                    break;
                default: throw new IllegalArgumentException(line);
            }
        }
    }
}
