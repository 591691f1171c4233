// One member of Kafka's Java client on the consumer group protocol (KIP-848,
// group.protocol=consumer) as a child process of tests/: it prints a JSON line whenever its
// assignment changes ({"event": "assigned", "partitions": ["topic:p", ...]}) and takes
// "close" (leave and exit) on stdin.
//
//   java ConsumerMember BOOTSTRAP GROUP SUBSCRIPTION ASSIGNOR CLIENT_ID
//
// SUBSCRIPTION: "re:PATTERN" subscribes with a SubscriptionPattern (the regex goes to the
// coordinator, RE2/J syntax); otherwise a comma-separated list of topics.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ConsumerMember {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], subscription = args[2];
        String assignor = args[3], clientId = args[4];
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        p.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());

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

        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            if (subscription.startsWith("re:")) {
                consumer.subscribe(new SubscriptionPattern(subscription.substring(3)));
            } else {
                consumer.subscribe(Arrays.asList(subscription.split(",")));
            }
            String last = null;
            while (true) {
                consumer.poll(Duration.ofMillis(100));
                List<String> now = new ArrayList<>();
                for (TopicPartition tp : consumer.assignment()) {
                    now.add(tp.topic() + ":" + tp.partition());
                }
                Collections.sort(now);
                String key = now.toString();
                if (!key.equals(last)) {
                    last = key;
                    Map<String, Object> ev = new LinkedHashMap<>();
                    ev.put("event", "assigned");
                    ev.put("partitions", now);
                    Json.print(ev);
                }
                String cmd;
                while ((cmd = commands.poll()) != null) {
                    if (cmd.equals("close")) {
                        consumer.close();
                        Map<String, Object> ev = new LinkedHashMap<>();
                        ev.put("event", "closed");
                        Json.print(ev);
                        return;
                    }
                }
            }
        }
    }
}
