// A transactional producer of Kafka's Java client (run by tests/clients/):
// sendOffsetsToTransaction then commit, then abort, a producer fenced by a newer one with the
// same transactional id, and offsets sent with a consumer member's stale group metadata.
// Offsets are fetched with require_stable, so Kafka's markers, written after EndTxn is
// answered, are in (see offsets()). Prints one JSON object: step name -> the group's committed offsets, or {"error": ...}.
//
//   java Txn BOOTSTRAP GROUP TOPIC TRANSACTIONAL_ID
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class Txn {
    static String topic;
    static final Map<String, Object> steps = new LinkedHashMap<>();

    static void step(String name, Callable<Object> f) {
        Object v;
        try {
            v = f.call();
        } catch (Exception e) {
            v = Map.of("error", Json.error(e));
        }
        steps.put(name, v);
    }

    /** The group's committed offsets of TOPIC's four partitions, asked for by partition:
     * Kafka answers a partition with pending transactional offsets UNSTABLE_OFFSET_COMMIT
     * under require_stable (the admin retries), and leaves a partition that has only pending
     * offsets out of an answer for all partitions. Kafka writes a transaction's markers
     * after it answers EndTxn, and until then a fetch may show the offsets from before the
     * transaction without saying they are unstable: asked again (up to 10 s) until each of
     * WANT has an offset. */
    static Map<String, Object> offsets(Admin admin, String group, int... want) throws Exception {
        for (int i = 0; ; i++) {
            Map<String, Object> got = fetch(admin, group);
            boolean all = true;
            for (int p : want) all &= got.containsKey(String.valueOf(p));
            if (all || i >= 200) return got;
            Thread.sleep(50);
        }
    }

    static Map<String, Object> fetch(Admin admin, String group) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < 4; p++) tps.add(new TopicPartition(topic, p));
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : admin.listConsumerGroupOffsets(
                 Map.of(group, new ListConsumerGroupOffsetsSpec().topicPartitions(tps)),
                 new ListConsumerGroupOffsetsOptions().requireStable(true))
                 .partitionsToOffsetAndMetadata(group).get().entrySet()) {
            if (e.getValue() != null) {
                out.put(String.valueOf(e.getKey().partition()), e.getValue().offset());
            }
        }
        return out;
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String txid) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txid);
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], txid = args[3];
        topic = args[2];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        TopicPartition p2 = new TopicPartition(topic, 2), p3 = new TopicPartition(topic, 3);
        ConsumerGroupMetadata anyone = new ConsumerGroupMetadata(group);
        try (Admin admin = Admin.create(ap)) {
            KafkaProducer<byte[], byte[]> first = producer(bootstrap, txid);
            first.initTransactions();
            step("committed", () -> {
                first.beginTransaction();
                first.sendOffsetsToTransaction(Map.of(p0, new OffsetAndMetadata(55)), anyone);
                first.commitTransaction();
                return offsets(admin, group, 0);
            });
            step("aborted", () -> {
                first.beginTransaction();
                first.sendOffsetsToTransaction(Map.of(p0, new OffsetAndMetadata(66),
                                                      p1, new OffsetAndMetadata(5)), anyone);
                first.abortTransaction();
                // (asked until partition 0 is answered: Kafka may leave it out until the
                // abort's markers are written, as above)
                return offsets(admin, group, 0);
            });
            first.beginTransaction();
            first.sendOffsetsToTransaction(Map.of(p1, new OffsetAndMetadata(7)), anyone);
            KafkaProducer<byte[], byte[]> second = producer(bootstrap, txid);
            second.initTransactions();  // fences the first and aborts its transaction
            step("fenced_commit", () -> {
                first.commitTransaction();
                return "ok";
            });
            first.close(Duration.ofSeconds(5));
            step("after_fencing", () -> offsets(admin, group));
            step("newer_committed", () -> {
                second.beginTransaction();
                second.sendOffsetsToTransaction(Map.of(p2, new OffsetAndMetadata(9)), anyone);
                second.commitTransaction();
                return offsets(admin, group, 2);
            });

            // with a member in the group: its own metadata passes, a made-up one does not
            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
            cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                   ByteArrayDeserializer.class.getName());
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 30000;
                while (consumer.assignment().isEmpty() && System.currentTimeMillis() < deadline) {
                    consumer.poll(Duration.ofMillis(100));
                }
                step("member_metadata", () -> {
                    second.beginTransaction();
                    second.sendOffsetsToTransaction(Map.of(p3, new OffsetAndMetadata(3)),
                                                    consumer.groupMetadata());
                    second.commitTransaction();
                    return offsets(admin, group, 3);
                });
                step("stale_metadata", () -> {
                    second.beginTransaction();
                    try {
                        second.sendOffsetsToTransaction(Map.of(p3, new OffsetAndMetadata(4)),
                            new ConsumerGroupMetadata(group, 9999, "no-such-member",
                                                      Optional.empty()));
                        second.commitTransaction();
                        return "ok";
                    } catch (Exception e) {
                        second.abortTransaction();
                        throw e;
                    }
                });
                step("after_stale", () -> offsets(admin, group));
            }
            second.close(Duration.ofSeconds(5));
        }
        Json.print(steps);
    }
}
