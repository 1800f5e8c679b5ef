package dev.comet.interop;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;

/**
 * Consumes what GrpcProducer sent (its "SENT i messageId" lines in a file) with the official
 * gRPC SDK, and checks the consumer side of the endpoint. Exits 0 when every check holds, else
 * prints each problem and exits 1.
 *
 * simple: a SimpleConsumer receives (10 s invisible time, 5 s long polls) and acks every
 * message, except two on their first delivery: message 0 is left alone and must come back once
 * its invisible time is over, message 1 gets changeInvisibleDuration(2 s) and must come back
 * after that. Both must come back with delivery attempt 2, every other message once with 1.
 *
 * push: a PushConsumer's listener returns FAILURE for message 0 on its first delivery and
 * SUCCESS otherwise: every message must be consumed, message 0 again with delivery attempt 2.
 *
 * fifo: a PushConsumer of a FIFO group (consumeMessageOrderly) on one message group; its
 * listener fails message 2 on its first delivery: every message must be consumed in the order
 * sent, message 2 twice in a row (attempts 1 and 2) before message 3.
 *
 * dlq: a SimpleConsumer of a group whose retryMaxTimes is 1 receives (10 s invisible time) and
 * never acks, until the file stopFile exists (the caller creates it once every message is in the
 * group's dead-letter topic); then it receives once more, which must bring nothing. Every message
 * must have been delivered exactly with attempts 1 and 2, never a third time.
 *
 * In all, each message id must be the one the producer's receipt named. With GRPC_ACCESS_KEY and
 * GRPC_SECRET_KEY set, requests are signed with that ACL account.
 *
 *     GrpcConsumer simple|push|fifo host:port topic group sent.txt timeoutSeconds
 *     GrpcConsumer dlq host:port topic group sent.txt timeoutSeconds stopFile
 */
public final class GrpcConsumer {
    private static final Duration INVISIBLE = Duration.ofSeconds(10);
    private static final Duration CHANGED = Duration.ofSeconds(2);
    private static final Duration AWAIT = Duration.ofSeconds(5);

    /** Message index → (delivery attempt → message id) of every delivery seen. */
    private final Map<Integer, Map<Integer, String>> deliveries = new ConcurrentHashMap<>();
    private final Map<Integer, Boolean> done = new ConcurrentHashMap<>();
    private final long start = System.currentTimeMillis();

    /** Whether this is the SimpleConsumer run, where message 1 comes back too. */
    private final boolean simpleRun;
    /** Whether this is the dead-letter run: nothing is acked, every message seen twice. */
    private final boolean dlqRun;
    /** Whether this is the FIFO run: message 2 is the one failed, and order matters. */
    private final boolean fifoRun;
    /** Every delivery's message index, in the order the listener saw them. */
    private final List<Integer> order = Collections.synchronizedList(new ArrayList<>());

    private GrpcConsumer(String mode) {
        this.simpleRun = "simple".equals(mode);
        this.fifoRun = "fifo".equals(mode);
        this.dlqRun = "dlq".equals(mode);
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String endpoint = args[1];
        String topic = args[2];
        String group = args[3];
        Map<Integer, String> sent = readSent(Path.of(args[4]));
        long deadline = System.currentTimeMillis() + Long.parseLong(args[5]) * 1000;
        ClientConfiguration configuration = Credentials.fromEnvironment(ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .setRequestTimeout(Duration.ofSeconds(10))).build();
        GrpcConsumer run = new GrpcConsumer(mode);
        if (run.simpleRun) {
            run.simple(configuration, topic, group, sent.size(), deadline);
        } else if (run.dlqRun) {
            run.neverAck(configuration, topic, group, Path.of(args[6]), deadline);
        } else {
            run.push(configuration, topic, group, sent.size(), deadline);
        }
        List<String> problems = run.check(sent);
        problems.forEach(System.out::println);
        System.out.println(problems.isEmpty()
            ? mode + " consumer: " + sent.size() + " messages consumed, each redelivery as expected"
            : mode + " consumer: " + problems.size() + " problems");
        System.exit(problems.isEmpty() ? 0 : 1);
    }

    private static Map<Integer, String> readSent(Path path) throws IOException {
        Map<Integer, String> sent = new TreeMap<>();
        for (String line : Files.readAllLines(path)) {
            String[] parts = line.trim().split(" ");
            if (parts.length >= 3 && "SENT".equals(parts[0])) {
                sent.put(Integer.parseInt(parts[1]), parts[2]);
            }
        }
        return sent;
    }

    /** Records a delivery; returns the message's index. */
    private int record(MessageView view) {
        String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
        int i = Integer.parseInt(body.substring("grpc-body-".length()));
        int attempt = view.getDeliveryAttempt();
        deliveries.computeIfAbsent(i, k -> new ConcurrentHashMap<>())
            .put(attempt, view.getMessageId().toString());
        order.add(i);
        System.err.println(elapsed() + " RECEIVED " + i + " " + view.getMessageId() + " attempt " + attempt);
        return i;
    }

    private String elapsed() {
        return String.format("%6d ms", System.currentTimeMillis() - start);
    }

    private void simple(ClientConfiguration configuration, String topic, String group, int count,
        long deadline) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(configuration)
            .setConsumerGroup(group)
            .setAwaitDuration(AWAIT)
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .build()) {
            while (done.size() < count && System.currentTimeMillis() < deadline) {
                for (MessageView view : consumer.receive(16, INVISIBLE)) {
                    int i = record(view);
                    if (view.getDeliveryAttempt() == 1 && i == 0) {
                        continue;
                    }
                    if (view.getDeliveryAttempt() == 1 && i == 1) {
                        consumer.changeInvisibleDuration(view, CHANGED);
                        continue;
                    }
                    consumer.ack(view);
                    done.put(i, true);
                }
            }
        }
    }

    /**
     * Receives without acking until stopFile exists or the deadline passes, then receives once
     * more: what that brings was delivered after the caller found it dead-lettered.
     */
    private void neverAck(ClientConfiguration configuration, String topic, String group,
        Path stopFile, long deadline) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(configuration)
            .setConsumerGroup(group)
            .setAwaitDuration(AWAIT)
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .build()) {
            while (!Files.exists(stopFile) && System.currentTimeMillis() < deadline) {
                consumer.receive(16, INVISIBLE).forEach(this::record);
            }
            System.err.println(elapsed() + " stop file seen, one last receive");
            for (MessageView view : consumer.receive(16, INVISIBLE)) {
                int i = record(view);
                lateDeliveries.add(i);
            }
        }
    }

    /** Messages delivered after they were found in the dead-letter topic (dlq run). */
    private final List<Integer> lateDeliveries = Collections.synchronizedList(new ArrayList<>());

    private void push(ClientConfiguration configuration, String topic, String group, int count,
        long deadline) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        // Not closed: closing waits for the long polls in flight (up to 20 s); the process exits
        // once the checks are done instead.
        PushConsumer consumer = provider.newPushConsumerBuilder()
            .setClientConfiguration(configuration)
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .setMessageListener(view -> {
                int i = record(view);
                if (i == failed() && view.getDeliveryAttempt() == 1) {
                    return ConsumeResult.FAILURE;
                }
                done.put(i, true);
                return ConsumeResult.SUCCESS;
            })
            .build();
        System.err.println(elapsed() + " push consumer " + consumer.getConsumerGroup() + " started");
        while (done.size() < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
    }

    /** The message the push listener fails on its first delivery. */
    private int failed() {
        return fifoRun ? 2 : 0;
    }

    private List<String> check(Map<Integer, String> sent) {
        List<String> problems = new ArrayList<>();
        if (dlqRun) {
            if (!lateDeliveries.isEmpty()) {
                problems.add("messages " + lateDeliveries + " delivered after reaching the dead-letter topic");
            }
            // Nothing is acked in this run: the attempts checked below stand for consumption.
            for (int i : sent.keySet()) {
                done.put(i, true);
            }
        }
        if (fifoRun) {
            List<Integer> want = new ArrayList<>();
            for (int i : sent.keySet()) {
                want.add(i);
                if (i == failed()) {
                    want.add(i);
                }
            }
            if (!order.equals(want)) {
                problems.add("deliveries in the order " + order + ", expected " + want);
            }
        }
        for (Map.Entry<Integer, String> e : sent.entrySet()) {
            int i = e.getKey();
            Map<Integer, String> seen = deliveries.getOrDefault(i, Collections.emptyMap());
            if (!done.containsKey(i)) {
                problems.add("message " + i + " never consumed successfully (deliveries " + seen + ")");
            }
            for (String id : seen.values()) {
                if (!id.equals(e.getValue())) {
                    problems.add("message " + i + " delivered with id " + id + ", sent as " + e.getValue());
                }
            }
            boolean redelivered = dlqRun || (simpleRun ? i <= 1 : i == failed());
            Set<Integer> want = redelivered ? Set.of(1, 2) : Set.of(1);
            if (!seen.keySet().equals(want)) {
                problems.add("message " + i + ": delivery attempts " + seen.keySet() + ", expected " + want);
            }
        }
        return problems;
    }
}
