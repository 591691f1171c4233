// Kafka's Java Admin client on one group, step by step (run by tests/clients/): alter, list,
// delete offsets, list, describe and delete groups, with and without a member in the group.
// Prints one JSON object: step name -> what the step returned, or {"error": ExceptionName}.
//
//   java GroupAdmin BOOTSTRAP GROUP TOPIC
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class GroupAdmin {
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

    static Map<String, Object> offsets(Admin admin, String group) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : admin.listConsumerGroupOffsets(group)
                 .partitionsToOffsetAndMetadata().get().entrySet()) {
            OffsetAndMetadata om = e.getValue();
            out.put(e.getKey().topic() + ":" + e.getKey().partition(),
                    om == null ? null : List.of(om.offset(), om.metadata()));
        }
        return out;
    }

    static Map<String, Object> describe(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
            .describedGroups().get(group).get();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", String.valueOf(d.groupState()));
        out.put("simple", d.isSimpleConsumerGroup());
        out.put("assignor", d.partitionAssignor());
        out.put("type", String.valueOf(d.type()));
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            List<Integer> parts = new ArrayList<>();
            for (TopicPartition tp : m.assignment().topicPartitions()) parts.add(tp.partition());
            Collections.sort(parts);
            members.add(Map.of("clientId", m.clientId(), "partitions", parts,
                               "instanceId", m.groupInstanceId().orElse("")));
        }
        out.put("members", members);
        return out;
    }

    static Object listed(Admin admin, String group) throws Exception {
        for (GroupListing g : admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get()) {
            if (g.groupId().equals(group)) {
                return Map.of("state", String.valueOf(g.groupState().orElse(null)),
                              "type", String.valueOf(g.type().orElse(null)),
                              "protocol", g.protocol(), "simple", g.isSimpleConsumerGroup());
            }
        }
        return "absent";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        TopicPartition p2 = new TopicPartition(topic, 2);
        try (Admin admin = Admin.create(ap)) {
            step("describe_unknown", () -> describe(admin, group));
            step("alter_empty", () -> {
                admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(10, "a"),
                    p1, new OffsetAndMetadata(11, ""))).all().get();
                return "ok";
            });
            step("offsets_1", () -> offsets(admin, group));
            step("listed_offsets_only", () -> listed(admin, group));
            step("describe_offsets_only", () -> describe(admin, group));

            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "admin-member");
            cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
            cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
            cp.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                   "org.apache.kafka.clients.consumer.RangeAssignor");
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                   ByteArrayDeserializer.class.getName());
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 30000;
                while (consumer.assignment().isEmpty() && System.currentTimeMillis() < deadline) {
                    consumer.poll(Duration.ofMillis(100));
                }
                step("member_committed", () -> {
                    consumer.commitSync(Map.of(p2, new OffsetAndMetadata(12, "m")));
                    return "ok";
                });
                step("describe_stable", () -> describe(admin, group));
                step("listed_stable", () -> listed(admin, group));
                step("delete_offsets_subscribed", () -> {
                    admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all().get();
                    return "ok";
                });
                step("delete_group_nonempty", () -> {
                    admin.deleteConsumerGroups(List.of(group)).all().get();
                    return "ok";
                });
                step("alter_with_member", () -> {
                    admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(99)))
                        .all().get();
                    return "ok";
                });
                step("offsets_2", () -> offsets(admin, group));
                // the member keeps heartbeating while the admin works above
                consumer.poll(Duration.ofMillis(10));
            }
            step("describe_after_leave", () -> describe(admin, group));
            step("delete_offsets_empty", () -> {
                admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all().get();
                return "ok";
            });
            step("offsets_3", () -> offsets(admin, group));
            step("delete_group", () -> {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                return "ok";
            });
            step("describe_deleted", () -> describe(admin, group));
            step("listed_deleted", () -> listed(admin, group));
            step("offsets_deleted", () -> offsets(admin, group));
            step("delete_group_again", () -> {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                return "ok";
            });
            step("delete_offsets_unknown_group", () -> {
                admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all().get();
                return "ok";
            });
        }
        Json.print(steps);
    }
}
