// One consumer-group member of Kafka's Java client (classic protocol) as a child process of
// tests/clients/: it prints a JSON line whenever its generation, member id or assignment
// changes, and takes commands on stdin: "commit P OFFSET" (commitSync as the member),
// "committed" (what the group has for the assigned partitions), "close" (leave and exit).
//
//   java Member BOOTSTRAP GROUP TOPIC STRATEGY CLIENT_ID INSTANCE_ID|- SESSION_MS
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class Member {
    static String assignor(String name) {
        switch (name) {
            case "range": return "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin": return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky": return "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky":
                return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default: throw new IllegalArgumentException(name);
        }
    }

    static List<Integer> partitions(Collection<TopicPartition> tps) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : tps) out.add(tp.partition());
        Collections.sort(out);
        return out;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], strategy = args[3];
        String clientId = args[4], instanceId = args[5];
        int sessionMs = Integer.parseInt(args[6]);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        if (!instanceId.equals("-")) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor(strategy));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(sessionMs));
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "30000");
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        p.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        // client security settings (security.protocol, ssl.*, sasl.*) from a properties file
        String extra = System.getenv("CLIENT_PROPERTIES");
        if (extra != null) {
            try (FileInputStream in = new FileInputStream(extra)) { p.load(in); }
        }

        ConcurrentLinkedQueue<String> commands = new ConcurrentLinkedQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null) commands.add(line.trim());
            } catch (Exception e) { /* stdin closed */ }
            commands.add("close");
        });
        reader.setDaemon(true);
        reader.start();

        final int[] rebalances = {0};
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {}
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    rebalances[0]++;
                }
            });
            String last = "";
            while (true) {
                consumer.poll(Duration.ofMillis(100));
                ConsumerGroupMetadata meta = consumer.groupMetadata();
                List<Integer> now = partitions(consumer.assignment());
                String key = meta.generationId() + "/" + meta.memberId() + "/" + now
                             + "/" + rebalances[0];
                if (rebalances[0] > 0 && !key.equals(last)) {
                    last = key;
                    Map<String, Object> ev = new LinkedHashMap<>();
                    ev.put("event", "assigned");
                    ev.put("generation", meta.generationId());
                    ev.put("memberId", meta.memberId());
                    ev.put("partitions", now);
                    ev.put("rebalances", rebalances[0]);
                    Json.print(ev);
                }
                String cmd;
                while ((cmd = commands.poll()) != null) {
                    String[] w = cmd.split(" ");
                    Map<String, Object> ev = new LinkedHashMap<>();
                    if (w[0].equals("close")) {
                        consumer.close();
                        ev.put("event", "closed");
                        Json.print(ev);
                        return;
                    } else if (w[0].equals("commit")) {
                        ev.put("event", "committed");
                        try {
                            consumer.commitSync(Map.of(new TopicPartition(topic,
                                Integer.parseInt(w[1])), new OffsetAndMetadata(
                                Long.parseLong(w[2]), "java")));
                            ev.put("error", null);
                        } catch (Exception e) {
                            ev.put("error", Json.error(e));
                        }
                        Json.print(ev);
                    } else if (w[0].equals("committed")) {
                        Map<String, Object> got = new TreeMap<>();
                        for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                                 consumer.committed(consumer.assignment()).entrySet()) {
                            got.put(String.valueOf(e.getKey().partition()),
                                    e.getValue() == null ? null : e.getValue().offset());
                        }
                        ev.put("event", "offsets");
                        ev.put("offsets", got);
                        Json.print(ev);
                    }
                }
            }
        }
    }
}
