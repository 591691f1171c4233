// Several members of Kafka's Java client on the consumer group protocol (KIP-848,
// group.protocol=consumer) in one JVM, each a KafkaConsumer on its own thread (one JVM per
// member would not fit ten members on the test machines). Each prints a JSON line whenever
// its assignment changes ({"event": "assigned", "member": NAME, "partitions": ["topic:p"]}).
//
//   java ConsumerMembers BOOTSTRAP GROUP TOPICS ASSIGNOR NAME...
//
// TOPICS: comma-separated. NAME: the member's client.id. Commands on stdin, one a line:
//   start NAME              a new member
//   close NAME              that member leaves the group (closes); prints "closed"
//   commit NAME OFFSET      commitSync of OFFSET for each partition it owns; prints
//                           {"event": "committed", "member", "partitions", "error"}
//   exit                    every member leaves, then the program exits
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class ConsumerMembers {
    private static final Map<String, ConcurrentLinkedQueue<String>> INBOX = new ConcurrentHashMap<>();
    private static final List<Thread> THREADS = Collections.synchronizedList(new ArrayList<>());

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], assignor = args[3];
        List<String> topics = Arrays.asList(args[2].split(","));
        for (int i = 4; i < args.length; i++) start(bootstrap, group, topics, assignor, args[i]);
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.trim().split(" ");
                if (w[0].equals("exit")) break;
                if (w[0].equals("start")) {
                    start(bootstrap, group, topics, assignor, w[1]);
                } else if (INBOX.containsKey(w[1])) {
                    INBOX.get(w[1]).add(line.trim());
                }
            }
        }
        for (ConcurrentLinkedQueue<String> q : INBOX.values()) q.add("close");
        for (Thread t : new ArrayList<>(THREADS)) t.join(30_000);
        System.exit(0);
    }

    private static void start(String bootstrap, String group, List<String> topics,
                              String assignor, String name) {
        ConcurrentLinkedQueue<String> inbox = new ConcurrentLinkedQueue<>();
        INBOX.put(name, inbox);
        Thread t = new Thread(() -> run(bootstrap, group, topics, assignor, name, inbox), name);
        THREADS.add(t);
        t.start();
    }

    private static void emit(String event, String name, Object... kv) {
        Map<String, Object> ev = new LinkedHashMap<>();
        ev.put("event", event);
        ev.put("member", name);
        for (int i = 0; i < kv.length; i += 2) ev.put((String) kv[i], kv[i + 1]);
        synchronized (System.out) {
            Json.print(ev);
        }
    }

    private static void run(String bootstrap, String group, List<String> topics,
                            String assignor, String name, ConcurrentLinkedQueue<String> inbox) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        p.put(ConsumerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG, "50");
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(topics);
            String last = null;
            while (true) {
                try {
                    consumer.poll(Duration.ofMillis(100));
                } catch (Exception e) {
                    emit("error", name, "error", e.toString());
                }
                List<String> now = new ArrayList<>();
                for (TopicPartition tp : consumer.assignment()) now.add(tp.topic() + ":" + tp.partition());
                Collections.sort(now);
                String key = now.toString();
                if (!key.equals(last)) {
                    last = key;
                    emit("assigned", name, "partitions", now);
                }
                String cmd;
                while ((cmd = inbox.poll()) != null) {
                    String[] w = cmd.split(" ");
                    if (w[0].equals("close")) {
                        consumer.close();
                        emit("closed", name);
                        return;
                    }
                    if (w[0].equals("commit")) {
                        long offset = Long.parseLong(w[2]);
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        for (TopicPartition tp : consumer.assignment()) offsets.put(tp, new OffsetAndMetadata(offset));
                        Object error = null;
                        try {
                            consumer.commitSync(offsets, Duration.ofSeconds(20));
                        } catch (Exception e) {
                            error = e.toString();
                        }
                        List<String> done = new ArrayList<>();
                        for (TopicPartition tp : offsets.keySet()) done.add(tp.topic() + ":" + tp.partition());
                        Collections.sort(done);
                        emit("committed", name, "partitions", done, "error", error);
                    }
                }
            }
        }
    }
}
