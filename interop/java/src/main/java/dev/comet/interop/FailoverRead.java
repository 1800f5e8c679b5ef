package dev.comet.interop;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The Java side of the failover-read suite (interop/failover-read/run.sh): a consumer group goes on
 * from its committed offsets at the slave while its broker group's master is down. The same
 * source is built for rocketmq-client 4.9.x and 5.x (interop/java/pom.xml).
 *
 * <p>Client roles, run with the client version under test:
 * <ul>
 *   <li>{@code produce <namesrv> <topic> <bodyPrefix> <count>}: sends bodies {@code prefix0 ..
 *       prefix(count-1)}, every send SEND_OK.</li>
 *   <li>{@code consume <namesrv> <topic> <group> <count> <idleSeconds> <outFile>}: a push consumer
 *       (CONSUME_FROM_FIRST_OFFSET, one consume thread, one message per listener call) that writes
 *       every delivered body as a line of {@code outFile}; it stops after {@code count} deliveries
 *       or after {@code idleSeconds} without one (at least 60 s before the first), and shuts down,
 *       committing what it consumed.
 *       Apart from that first wait, these are the stop rules of {@code comet consume --count --idle}.</li>
 *   <li>{@code consume-held <namesrv> <topic> <group> <holdAfter> <releaseFile> <stopFile>
 *       <outFile>}: a push consumer that keeps most of the backlog on the brokers: one message
 *       per pull, at most one message cached per queue before its pulls pause
 *       (pullBatchSize=1, pullThresholdForQueue=1), one consume thread. Its listener consumes
 *       {@code holdAfter} messages, then blocks until {@code releaseFile} exists; the consumer
 *       runs until {@code stopFile} exists.</li>
 * </ul>
 *
 * <p>Checks, run with the 5.3.3 build (they ask one broker at a time, so they do not depend on
 * how a client version chooses brokers):
 * <ul>
 *   <li>{@code create-topic <namesrv> <masterAddr> <queues> <topic>...}: creates each topic on the
 *       master and waits until the name server routes it.</li>
 *   <li>{@code wait-synced <namesrv> <masterAddr> <slaveAddr> <timeoutSeconds> <topic>=<messages>...}:
 *       waits until GET_MAX_OFFSET of every queue, asked at the slave's address, equals the
 *       master's answer and the queues of each topic hold {@code messages} in all.</li>
 *   <li>{@code wait-group-synced <namesrv> <masterAddr> <slaveAddr> <timeoutSeconds>
 *       <group>@<topic>=<total>...}: waits until the group's committed offsets at the master
 *       (QUERY_CONSUMER_OFFSET) add up to {@code total} and the slave answers the same offset
 *       for every queue.</li>
 *   <li>{@code wait-no-master <namesrv> <timeoutSeconds> <topic>...}: waits until each topic's
 *       route names its broker with a slave and without a master (brokerId 0).</li>
 *   <li>{@code wait-group-at-end <namesrv> <brokerAddr> <timeoutSeconds> <group>@<topic>...}:
 *       waits until the group's committed offset of every queue, asked at that broker, equals
 *       the queue's max offset there.</li>
 * </ul>
 *
 * <p>Every wait is a condition poll with a deadline. The last line printed is {@code PASS
 * <command>} or {@code FAIL <command>: <reason>}; the exit code is 0 only on PASS.
 */
public final class FailoverRead {
    /** How often a waiting condition is re-evaluated. */
    private static final long POLL_MS = 200;
    /** How often a held listener or a running consumer looks for its release or stop file. */
    private static final long FILE_POLL_MS = 50;
    /** How long {@code consume} waits for its first message when the idle time is shorter. */
    private static final long FIRST_DELIVERY_MS = 60_000;
    /** Producer send timeout and admin RPC timeout: generous, the two cores are shared. */
    private static final int RPC_TIMEOUT_MS = 10_000;
    /** How long a consumer's shutdown waits for a listener call still running. */
    private static final long SHUTDOWN_WAIT_MS = 5_000;
    /** Upper bound of a held consumer's life, so that a lost stop file leaves no JVM behind. */
    private static final long HELD_MAX_LIFE_MS = 15 * 60_000;
    /** Read and write permission of a topic (PermName.PERM_READ | PermName.PERM_WRITE). */
    private static final int PERM_READ_WRITE = 6;
    /** Answer code of QUERY_CONSUMER_OFFSET for a group without an offset (QUERY_NOT_FOUND). */
    private static final int QUERY_NOT_FOUND = 22;
    /** brokerId of a master in a route. */
    private static final long MASTER_ID = 0L;

    private final String command;

    private FailoverRead(String command) {
        this.command = command;
    }

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: FailoverRead <command> <args...> (see the class comment)");
            System.exit(2);
        }
        FailoverRead runner = new FailoverRead(args[0]);
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        int code;
        try {
            runner.run(rest);
            System.out.println("PASS " + runner.command);
            code = 0;
        } catch (CheckFailed e) {
            System.out.println("FAIL " + runner.command + ": " + e.getMessage());
            code = 1;
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.println("FAIL " + runner.command + ": " + oneLine(e));
            code = 1;
        }
        System.out.flush();
        // Client threads (netty, schedulers) are not all daemons; leave no JVM behind.
        System.exit(code);
    }

    private void run(String[] a) throws Exception {
        switch (command) {
            case "produce" -> {
                arity(a, 4, "<namesrv> <topic> <bodyPrefix> <count>");
                produce(a[0], a[1], a[2], Integer.parseInt(a[3]));
            }
            case "consume" -> {
                arity(a, 6, "<namesrv> <topic> <group> <count> <idleSeconds> <outFile>");
                consume(a[0], a[1], a[2], Integer.parseInt(a[3]), Long.parseLong(a[4]) * 1000, Path.of(a[5]));
            }
            case "consume-held" -> {
                arity(a, 7, "<namesrv> <topic> <group> <holdAfter> <releaseFile> <stopFile> <outFile>");
                consumeHeld(a[0], a[1], a[2], Integer.parseInt(a[3]), Path.of(a[4]), Path.of(a[5]), Path.of(a[6]));
            }
            case "create-topic" -> {
                atLeast(a, 4, "<namesrv> <masterAddr> <queues> <topic>...");
                createTopics(a[0], a[1], Integer.parseInt(a[2]), List.of(a).subList(3, a.length));
            }
            case "wait-synced" -> {
                atLeast(a, 5, "<namesrv> <masterAddr> <slaveAddr> <timeoutSeconds> <topic>=<messages>...");
                waitSynced(a[0], a[1], a[2], deadline(a[3]), List.of(a).subList(4, a.length));
            }
            case "wait-group-synced" -> {
                atLeast(a, 5, "<namesrv> <masterAddr> <slaveAddr> <timeoutSeconds> <group>@<topic>=<total>...");
                waitGroupSynced(a[0], a[1], a[2], deadline(a[3]), List.of(a).subList(4, a.length));
            }
            case "wait-no-master" -> {
                atLeast(a, 3, "<namesrv> <timeoutSeconds> <topic>...");
                waitNoMaster(a[0], deadline(a[1]), List.of(a).subList(2, a.length));
            }
            case "wait-group-at-end" -> {
                atLeast(a, 4, "<namesrv> <brokerAddr> <timeoutSeconds> <group>@<topic>...");
                waitGroupAtEnd(a[0], a[1], deadline(a[2]), List.of(a).subList(3, a.length));
            }
            default -> throw new CheckFailed("unknown command " + command);
        }
    }

    // ---------------------------------------------------------------- client roles

    private void produce(String namesrv, String topic, String prefix, int count) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("FoP_" + topic);
        configureClient(producer, namesrv);
        producer.setSendMsgTimeout(RPC_TIMEOUT_MS);
        producer.start();
        try {
            for (int i = 0; i < count; i++) {
                SendResult r = producer.send(new Message(topic, (prefix + i).getBytes(StandardCharsets.UTF_8)));
                check(r.getSendStatus() == SendStatus.SEND_OK, "send " + prefix + i + ": status " + r.getSendStatus());
            }
        } finally {
            producer.shutdown();
        }
        System.out.println("failover-java: produced " + count + " messages " + prefix + "0.." + prefix + (count - 1) + " to " + topic);
    }

    private void consume(String namesrv, String topic, String group, int count, long idleMs, Path out) throws Exception {
        AtomicInteger delivered = new AtomicInteger();
        AtomicLong lastDelivery = new AtomicLong(System.currentTimeMillis());
        AtomicBoolean done = new AtomicBoolean();
        try (PrintWriter sink = sink(out)) {
            DefaultMQPushConsumer consumer = consumer(namesrv, group);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (done.get()) {
                        // Past the count: not recorded, so not reported consumed either; the
                        // call waits until the shutdown gives up on it, and its offset stays
                        // uncommitted.
                        waitForever();
                    }
                    record(sink, m);
                    lastDelivery.set(System.currentTimeMillis());
                    if (delivered.incrementAndGet() >= count) {
                        done.set(true);
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            // The first delivery may take longer than the idle time: a new consumer's first
            // rebalance and offset lookup against a slave whose master just died can take
            // 20-30 s on a busy machine.
            while (!done.get() && System.currentTimeMillis() - lastDelivery.get()
                < (delivered.get() == 0 ? Math.max(idleMs, FIRST_DELIVERY_MS) : idleMs)) {
                Thread.sleep(FILE_POLL_MS);
            }
            done.set(true);
            consumer.shutdown();
        }
        System.out.println("failover-java: " + group + " consumed " + delivered.get() + " messages of " + topic);
    }

    private void consumeHeld(String namesrv, String topic, String group, int holdAfter, Path release, Path stop,
                             Path out) throws Exception {
        AtomicInteger delivered = new AtomicInteger();
        try (PrintWriter sink = sink(out)) {
            DefaultMQPushConsumer consumer = consumer(namesrv, group);
            consumer.setPullBatchSize(1);
            consumer.setPullThresholdForQueue(1);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (delivered.get() >= holdAfter) {
                        waitForFile(release);
                    }
                    record(sink, m);
                    delivered.incrementAndGet();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            System.out.println("failover-java: " + group + " started; its listener holds after " + holdAfter + " messages");
            long deadline = System.currentTimeMillis() + HELD_MAX_LIFE_MS;
            while (!Files.exists(stop)) {
                check(System.currentTimeMillis() < deadline, "stop file " + stop + " within " + HELD_MAX_LIFE_MS + " ms");
                Thread.sleep(FILE_POLL_MS);
            }
            consumer.shutdown();
        }
        System.out.println("failover-java: " + group + " consumed " + delivered.get() + " messages of " + topic);
    }

    /** One consume thread and one message per listener call, as {@code comet consume} runs. */
    private static DefaultMQPushConsumer consumer(String namesrv, String group) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        configureClient(c, namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setConsumeThreadMin(1);
        c.setConsumeThreadMax(1);
        c.setConsumeMessageBatchMaxSize(1);
        // The shutdown lets a running listener call finish and record its offset before the
        // final commit.
        c.setAwaitTerminationMillisWhenShutdown(SHUTDOWN_WAIT_MS);
        return c;
    }

    private static PrintWriter sink(Path out) throws IOException {
        return new PrintWriter(new OutputStreamWriter(new FileOutputStream(out.toFile(), true), StandardCharsets.UTF_8), true);
    }

    /** Appends the body as one line; one listener thread at a time, so lines never interleave. */
    private static void record(PrintWriter sink, MessageExt m) {
        synchronized (sink) {
            sink.println(new String(m.getBody(), StandardCharsets.UTF_8));
        }
    }

    private static void waitForFile(Path file) {
        while (!Files.exists(file)) {
            sleepQuietly();
        }
    }

    private static void waitForever() {
        while (true) {
            sleepQuietly();
        }
    }

    private static void sleepQuietly() {
        try {
            Thread.sleep(FILE_POLL_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while held", e);
        }
    }

    // ---------------------------------------------------------------- checks

    private void createTopics(String namesrv, String master, int queues, List<String> topics) throws Exception {
        DefaultMQAdminExt admin = admin(namesrv);
        try {
            for (String topic : topics) {
                admin.createAndUpdateTopicConfig(master, new TopicConfig(topic, queues, queues, PERM_READ_WRITE));
            }
            long deadline = System.currentTimeMillis() + RPC_TIMEOUT_MS * 6L;
            for (String topic : topics) {
                await(deadline, "the route of " + topic, () -> {
                    var route = admin.examineTopicRouteInfo(topic);
                    return route != null && !route.getQueueDatas().isEmpty() ? null : "no queue data";
                });
            }
        } finally {
            admin.shutdown();
        }
        System.out.println("failover-java: created " + topics + " with " + queues + " queues on " + master);
    }

    private void waitSynced(String namesrv, String master, String slave, long deadline, List<String> specs) throws Exception {
        DefaultMQAdminExt admin = admin(namesrv);
        try {
            MQClientAPIImpl api = api(admin);
            for (String spec : specs) {
                String topic = spec.substring(0, spec.lastIndexOf('='));
                long messages = Long.parseLong(spec.substring(spec.lastIndexOf('=') + 1));
                Routed t = routed(admin, topic);
                long[][] last = new long[2][];
                await(deadline, "the slave " + slave + " holds every message of " + topic + " (" + messages + ")", () -> {
                    long[] m = maxOffsets(api, master, t);
                    long[] s = maxOffsets(api, slave, t);
                    last[0] = m;
                    last[1] = s;
                    if (sum(m) != messages) {
                        return "master max offsets " + Arrays.toString(m) + " do not add up to " + messages;
                    }
                    return Arrays.equals(m, s) ? null
                        : "slave max offsets " + Arrays.toString(s) + ", master's " + Arrays.toString(m);
                });
                System.out.println("failover-java: " + topic + " max offsets " + Arrays.toString(last[1]) + " at the slave = master's");
            }
        } finally {
            admin.shutdown();
        }
    }

    private void waitGroupSynced(String namesrv, String master, String slave, long deadline, List<String> specs) throws Exception {
        DefaultMQAdminExt admin = admin(namesrv);
        try {
            MQClientAPIImpl api = api(admin);
            for (String spec : specs) {
                String group = spec.substring(0, spec.indexOf('@'));
                String topic = spec.substring(spec.indexOf('@') + 1, spec.lastIndexOf('='));
                long total = Long.parseLong(spec.substring(spec.lastIndexOf('=') + 1));
                Routed t = routed(admin, topic);
                await(deadline, "the slave " + slave + " holds " + group + "'s offsets of " + topic
                    + " committed at the master (" + total + " in all)", () -> {
                        long[] m = consumerOffsets(api, master, group, t);
                        long[] s = consumerOffsets(api, slave, group, t);
                        if (sum(m) != total) {
                            return "master offsets " + Arrays.toString(m) + " do not add up to " + total;
                        }
                        return Arrays.equals(m, s) ? null
                            : "slave offsets " + Arrays.toString(s) + ", master's " + Arrays.toString(m);
                    });
                System.out.println("failover-java: " + group + "'s offsets of " + topic + " at the slave "
                    + Arrays.toString(consumerOffsets(api, slave, group, t)) + " = master's");
            }
        } finally {
            admin.shutdown();
        }
    }

    private void waitNoMaster(String namesrv, long deadline, List<String> topics) throws Exception {
        DefaultMQAdminExt admin = admin(namesrv);
        try {
            for (String topic : topics) {
                await(deadline, "the route of " + topic + " names a slave and no master", () -> {
                    var route = admin.examineTopicRouteInfo(topic);
                    if (route == null || route.getBrokerDatas().isEmpty()) {
                        return "no broker in the route";
                    }
                    for (var broker : route.getBrokerDatas()) {
                        var addrs = broker.getBrokerAddrs();
                        if (addrs.containsKey(MASTER_ID) || addrs.isEmpty()) {
                            return broker.getBrokerName() + " " + addrs;
                        }
                    }
                    return null;
                });
                var route = admin.examineTopicRouteInfo(topic);
                List<String> brokers = new ArrayList<>();
                route.getBrokerDatas().forEach(b -> brokers.add(b.getBrokerName() + " " + b.getBrokerAddrs()));
                System.out.println("failover-java: the route of " + topic + " names " + brokers);
            }
        } finally {
            admin.shutdown();
        }
    }

    private void waitGroupAtEnd(String namesrv, String broker, long deadline, List<String> specs) throws Exception {
        DefaultMQAdminExt admin = admin(namesrv);
        try {
            MQClientAPIImpl api = api(admin);
            for (String spec : specs) {
                String group = spec.substring(0, spec.indexOf('@'));
                String topic = spec.substring(spec.indexOf('@') + 1);
                Routed t = routed(admin, topic);
                await(deadline, group + "'s offsets of " + topic + " at " + broker + " reach the end of every queue", () -> {
                    long[] max = maxOffsets(api, broker, t);
                    long[] committed = consumerOffsets(api, broker, group, t);
                    return Arrays.equals(max, committed) ? null
                        : "committed " + Arrays.toString(committed) + ", max offsets " + Arrays.toString(max);
                });
                System.out.println("failover-java: " + group + "'s offsets of " + topic + " at " + broker + " = max offsets "
                    + Arrays.toString(maxOffsets(api, broker, t)));
            }
        } finally {
            admin.shutdown();
        }
    }

    // ---------------------------------------------------------------- helpers

    private static void configureClient(ClientConfig config, String namesrv) {
        config.setNamesrvAddr(namesrv);
        config.setInstanceName("fo" + ProcessHandle.current().pid());
        config.setVipChannelEnabled(false);
    }

    private static DefaultMQAdminExt admin(String namesrv) throws Exception {
        DefaultMQAdminExt a = new DefaultMQAdminExt(RPC_TIMEOUT_MS);
        configureClient(a, namesrv);
        a.setAdminExtGroup("FoA_" + ProcessHandle.current().pid());
        a.start();
        return a;
    }

    /**
     * The remoting API of the admin tool's client instance, to ask one broker address directly.
     * The instance is the one the admin started: the client manager keys instances by client id,
     * and the admin tool is its own client config.
     */
    private static MQClientAPIImpl api(DefaultMQAdminExt admin) {
        return MQClientManager.getInstance().getOrCreateMQClientInstance(admin).getMQClientAPIImpl();
    }

    /** A topic as the name server routes it: one broker group and its number of read queues. */
    private record Routed(String topic, String brokerName, int queues) {
        MessageQueue queue(int id) {
            return new MessageQueue(topic, brokerName, id);
        }
    }

    private static Routed routed(DefaultMQAdminExt admin, String topic) throws Exception {
        var route = admin.examineTopicRouteInfo(topic);
        check(route != null && route.getQueueDatas().size() == 1,
            "the route of " + topic + " names one broker group: " + (route == null ? "none" : route.getQueueDatas()));
        var queueData = route.getQueueDatas().get(0);
        check(queueData.getReadQueueNums() > 0, "the route of " + topic + " has queues");
        return new Routed(topic, queueData.getBrokerName(), queueData.getReadQueueNums());
    }

    /** GET_MAX_OFFSET of every queue, asked at {@code addr}. */
    private static long[] maxOffsets(MQClientAPIImpl api, String addr, Routed t) throws Exception {
        long[] out = new long[t.queues()];
        for (int q = 0; q < out.length; q++) {
            out[q] = api.getMaxOffset(addr, t.queue(q), RPC_TIMEOUT_MS);
        }
        return out;
    }

    /**
     * QUERY_CONSUMER_OFFSET of every queue, asked at {@code addr}; -1 for a queue the broker has no
     * offset of. The request header class moved from rocketmq-common (4.x) to rocketmq-remoting
     * (5.x); the API method's parameter type names the right one for either build.
     */
    private static long[] consumerOffsets(MQClientAPIImpl api, String addr, String group, Routed t) throws Exception {
        Method query = null;
        for (Method m : MQClientAPIImpl.class.getMethods()) {
            if (m.getName().equals("queryConsumerOffset") && m.getParameterCount() == 3) {
                query = m;
            }
        }
        if (query == null) {
            throw new IllegalStateException("MQClientAPIImpl has no queryConsumerOffset(addr, header, timeout)");
        }
        Class<?> headerType = query.getParameterTypes()[1];
        long[] out = new long[t.queues()];
        for (int q = 0; q < out.length; q++) {
            Object header = headerType.getConstructor().newInstance();
            headerType.getMethod("setConsumerGroup", String.class).invoke(header, group);
            headerType.getMethod("setTopic", String.class).invoke(header, t.topic());
            headerType.getMethod("setQueueId", Integer.class).invoke(header, q);
            setIfPresent(header, "setBrokerName", String.class, t.brokerName());
            // 5.x: answer QUERY_NOT_FOUND rather than 0 for a group without an offset.
            setIfPresent(header, "setSetZeroIfNotFound", Boolean.class, Boolean.FALSE);
            try {
                out[q] = (Long) query.invoke(api, addr, header, (long) RPC_TIMEOUT_MS);
            } catch (java.lang.reflect.InvocationTargetException e) {
                if (e.getCause() instanceof MQBrokerException b && b.getResponseCode() == QUERY_NOT_FOUND) {
                    out[q] = -1;
                } else if (e.getCause() instanceof Exception cause) {
                    throw cause;
                } else {
                    throw e;
                }
            }
        }
        return out;
    }

    private static void setIfPresent(Object target, String setter, Class<?> type, Object value) throws Exception {
        Method m;
        try {
            m = target.getClass().getMethod(setter, type);
        } catch (NoSuchMethodException e) {
            return;
        }
        m.invoke(target, value);
    }

    private static long sum(long[] values) {
        long s = 0;
        for (long v : values) {
            s += v;
        }
        return s;
    }

    private static long deadline(String seconds) {
        return System.currentTimeMillis() + Long.parseLong(seconds) * 1000;
    }

    /** A condition: null when it holds, else what was seen instead. */
    @FunctionalInterface
    private interface Condition {
        String unmet() throws Exception;
    }

    /** Polls the condition until it holds; past the deadline fails with the last thing seen. */
    private static void await(long deadline, String what, Condition condition) throws InterruptedException {
        String last;
        while (true) {
            try {
                last = condition.unmet();
            } catch (Exception e) {
                last = oneLine(e);
            }
            if (last == null) {
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new CheckFailed(what + ": not in time; last seen: " + last);
            }
            Thread.sleep(POLL_MS);
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new CheckFailed(what);
        }
    }

    private static void arity(String[] a, int n, String usage) {
        check(a.length == n, "usage: " + usage);
    }

    private static void atLeast(String[] a, int n, String usage) {
        check(a.length >= n, "usage: " + usage);
    }

    private static String oneLine(Throwable e) {
        String msg = e.getClass().getSimpleName() + ": " + e.getMessage();
        return msg.replace('\n', ' ').replace('\r', ' ');
    }

    /** A failed check: its message is the command's failing condition. */
    private static final class CheckFailed extends RuntimeException {
        CheckFailed(String message) {
            super(message);
        }
    }
}
