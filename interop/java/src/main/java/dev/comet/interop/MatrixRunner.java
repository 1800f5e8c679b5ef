package dev.comet.interop;

import java.nio.charset.StandardCharsets;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;

import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.trace.TraceContext;
import org.apache.rocketmq.client.trace.TraceDataEncoder;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * One scenario of the Comet interop matrix, run by the real Apache RocketMQ Java client (4.9.x or
 * 5.x, same source) against a running name server and broker.
 *
 * <p>Usage: {@code MatrixRunner <scenario> <namesrv host:port> <suffix>}. Every topic and group
 * name ends with the suffix so that scenarios can run in parallel against one broker. The last
 * lines printed are {@code CHECKS <n>} and {@code PASS <scenario>}, or {@code FAIL <scenario>:
 * <first failing check>}; the exit code is 0 only on PASS. A scenario passes only when every one
 * of its checks ran, and the harness also requires n &gt; 0.
 *
 * <p>Waits are condition polls bounded by {@link #STEP_TIMEOUT_MS}; nothing passes because time
 * went by. The only fixed pause is the one-second boundary the TIMESTAMP scenario needs, because
 * consumeTimestamp has a resolution of one second.
 */
public final class MatrixRunner {
    /** Queues of every topic a scenario creates (the client default is 4 as well). */
    private static final int QUEUES = 4;
    /** Upper bound of every wait for a condition (delivery, route, rebalance, index). */
    private static final long STEP_TIMEOUT_MS = Long.getLong("matrix.stepTimeoutMs", 60_000L);
    /** How long the clients get to shut down after the verdict. */
    private static final long SHUTDOWN_WAIT_MS = 5_000;
    /** How often a waiting condition is re-evaluated. */
    private static final long POLL_MS = 50;
    /** Producer send timeout: generous, the two cores are shared by several JVMs. */
    private static final int SEND_TIMEOUT_MS = 10_000;
    /** Offsets are committed this often by push consumers, so progress checks converge fast. */
    private static final int PERSIST_OFFSET_INTERVAL_MS = 1_000;
    /** Body length of the compression scenario; the client compresses bodies of 4096 bytes or more. */
    private static final int BIG_BODY_LEN = 8 * 1024;
    /** The delay level of the delay scenario and the shortest delay it must have (broker default 5 s). */
    private static final int DELAY_LEVEL = 2;
    private static final long DELAY_LEVEL_MIN_MS = 5_000;
    /** How far ahead the timer-message scenario asks for delivery. */
    private static final long TIMER_DELAY_MS = 3_000;
    /** maxReconsumeTimes of the retry/DLQ scenario. */
    private static final int MAX_RECONSUME = 2;
    /** Name prefix of a group's retry topic (MixAll.RETRY_GROUP_TOPIC_PREFIX). */
    private static final String RETRY_PREFIX = "%RETRY%";
    /** Read and write permission of a topic (PermName.PERM_READ | PermName.PERM_WRITE). */
    private static final int PERM_READ_WRITE = 6;
    /** ResponseCode.NO_PERMISSION: what an ACL broker answers a refused request with. */
    private static final int NO_PERMISSION = 16;
    /**
     * Accounts of the ACL broker, "accessKey:secretKey", set by matrix.sh for the acl-* rows: an
     * ordinary account (topicPerms name the acl rows' topics) and an admin one (creates topics).
     */
    private static final String ACL_USER_ENV = "MATRIX_ACL_USER";
    private static final String ACL_ADMIN_ENV = "MATRIX_ACL_ADMIN";
    /** Scenarios that run against the ACL broker start with this. */
    private static final String ACL_SCENARIO_PREFIX = "acl-";

    private static final long STARTED_NANOS = System.nanoTime();

    private final String scenario;
    private final String namesrv;
    private final String suffix;
    private final String topic;
    private final String group;
    private final List<Runnable> shutdowns = new ArrayList<>();
    private final AtomicInteger instances = new AtomicInteger();
    /** Signs the scenario's producers and consumers (acl-* scenarios only, else null). */
    private final RPCHook userHook;
    /** Signs the admin tool (acl-* scenarios only, else null). */
    private final RPCHook adminHook;
    private int checks;
    /** Last answer of examineConsumeStats, quoted when a lag condition times out. */
    private volatile String lastStatsError = "";

    private MatrixRunner(String scenario, String namesrv, String suffix) {
        this.scenario = scenario;
        this.namesrv = namesrv;
        this.suffix = suffix;
        String tag = scenario.replace('-', '_');
        this.topic = "MxT_" + tag + "_" + suffix;
        this.group = "MxG_" + tag + "_" + suffix;
        boolean acl = scenario.startsWith(ACL_SCENARIO_PREFIX);
        this.userHook = acl ? aclHook(ACL_USER_ENV, "") : null;
        this.adminHook = acl ? aclHook(ACL_ADMIN_ENV, "") : null;
    }

    /**
     * An AclClientRPCHook for the account in environment variable {@code env} ({@code spoil} is
     * appended to its secret), or null when the variable does not hold accessKey:secretKey.
     */
    private static RPCHook aclHook(String env, String spoil) {
        String account = System.getenv(env);
        int colon = account == null ? -1 : account.indexOf(':');
        if (colon <= 0) {
            return null;
        }
        return new AclClientRPCHook(new SessionCredentials(account.substring(0, colon), account.substring(colon + 1) + spoil));
    }

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: MatrixRunner <scenario> <namesrv> <suffix>");
            System.exit(2);
        }
        MatrixRunner runner = new MatrixRunner(args[0], args[1], args[2]);
        int code;
        try {
            runner.run();
            System.out.println("CHECKS " + runner.checks);
            System.out.println("PASS " + runner.scenario);
            code = 0;
        } catch (CheckFailed e) {
            System.out.println("CHECKS " + runner.checks);
            System.out.println("FAIL " + runner.scenario + ": " + e.getMessage());
            code = 1;
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.println("CHECKS " + runner.checks);
            System.out.println("FAIL " + runner.scenario + ": " + oneLine(e));
            code = 1;
        } finally {
            trace("shutting down");
            runner.shutdownAll();
            trace("shut down");
        }
        System.out.flush();
        // Client threads (netty, schedulers) are not all daemons; leave no JVM behind.
        System.exit(code);
    }

    private void run() throws Exception {
        if (scenario.startsWith(ACL_SCENARIO_PREFIX)) {
            check(userHook != null && adminHook != null,
                ACL_USER_ENV + " and " + ACL_ADMIN_ENV + " hold accessKey:secretKey for the ACL scenarios");
        }
        switch (scenario) {
            case "send-sync" -> sendSync();
            case "send-async" -> sendAsync();
            case "send-oneway" -> sendOneway();
            case "send-batch" -> sendBatch();
            case "properties" -> properties();
            case "compressed-body" -> compressedBody();
            case "clustering" -> clustering();
            case "broadcasting" -> broadcasting();
            case "orderly" -> orderly();
            case "retry-dlq" -> retryDlq();
            case "delay-level" -> delayLevel();
            case "timer-message" -> timerMessage();
            case "pop-consume" -> popConsume();
            case "from-first-offset" -> fromFirstOffset();
            case "from-last-offset" -> fromLastOffset();
            case "from-timestamp" -> fromTimestamp();
            case "lite-pull-seek" -> litePullSeek();
            case "pull-offset-restart" -> pullOffsetRestart();
            case "tag-filter" -> tagFilter();
            case "admin-topic" -> adminTopic();
            case "admin-consumer-progress" -> adminConsumerProgress();
            case "admin-query-message" -> adminQueryMessage();
            case "admin-reset-offset" -> adminResetOffset();
            case "transactions" -> transactions();
            case "acl-send-consume" -> aclSendConsume();
            case "acl-denied" -> aclDenied();
            case "tls-send-consume" -> tlsSendConsume();
            case "msg-trace" -> msgTrace();
            default -> throw new CheckFailed("unknown scenario " + scenario);
        }
    }

    // ---------------------------------------------------------------- scenarios: produce side

    private void sendSync() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        int count = 8;
        Map<String, String> sent = new HashMap<>();
        Map<Integer, List<Long>> offsetsPerQueue = new TreeMap<>();
        for (int i = 0; i < count; i++) {
            Message msg = new Message(topic, ("sync-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = producer.send(msg);
            check(r.getSendStatus() == SendStatus.SEND_OK, "send " + i + " status " + r.getSendStatus());
            check(notEmpty(r.getMsgId()), "send " + i + " has a msgId");
            check(notEmpty(r.getOffsetMsgId()), "send " + i + " has an offsetMsgId");
            check(topic.equals(r.getMessageQueue().getTopic()), "send " + i + " queue topic");
            offsetsPerQueue.computeIfAbsent(r.getMessageQueue().getQueueId(), k -> new ArrayList<>())
                .add(r.getQueueOffset());
            sent.put(r.getMsgId(), "sync-" + i);
        }
        for (Map.Entry<Integer, List<Long>> e : offsetsPerQueue.entrySet()) {
            List<Long> offsets = e.getValue();
            for (int i = 0; i < offsets.size(); i++) {
                check(offsets.get(i) == i, "queue " + e.getKey() + " offsets " + offsets + " are 0,1,2...");
            }
        }
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(count, "sync messages delivered");
        for (MessageExt m : c.messages()) {
            String body = body(m);
            check(body.equals(sent.get(m.getProperty("UNIQ_KEY"))),
                "delivered " + body + " has the msgId returned by its send");
        }
    }

    private void sendAsync() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        int count = 8;
        CountDownLatch done = new CountDownLatch(count);
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        Set<String> ids = ConcurrentHashMap.newKeySet();
        for (int i = 0; i < count; i++) {
            producer.send(new Message(topic, ("async-" + i).getBytes(StandardCharsets.UTF_8)), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    if (r.getSendStatus() != SendStatus.SEND_OK) {
                        errors.add("status " + r.getSendStatus());
                    }
                    ids.add(r.getMsgId());
                    done.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    errors.add(oneLine(e));
                    done.countDown();
                }
            });
        }
        check(done.await(STEP_TIMEOUT_MS, TimeUnit.MILLISECONDS), "all async callbacks ran");
        check(errors.isEmpty(), "async sends succeeded: " + errors);
        check(ids.size() == count, "async sends returned " + count + " distinct msgIds, got " + ids.size());
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(count, "async messages delivered");
        Set<String> delivered = new HashSet<>();
        c.messages().forEach(m -> delivered.add(m.getProperty("UNIQ_KEY")));
        check(delivered.equals(ids), "delivered msgIds equal the async send results");
    }

    private void sendOneway() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        int count = 8;
        Set<String> bodies = new HashSet<>();
        for (int i = 0; i < count; i++) {
            String body = "oneway-" + i;
            bodies.add(body);
            producer.sendOneway(new Message(topic, body.getBytes(StandardCharsets.UTF_8)));
        }
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(count, "oneway messages delivered");
        check(c.bodies().equals(bodies), "delivered bodies equal the oneway sends");
    }

    private void sendBatch() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        int count = 8;
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Message m = new Message(topic, "TagBatch", "BatchKey" + i, ("batch-" + i).getBytes(StandardCharsets.UTF_8));
            batch.add(m);
        }
        SendResult r = producer.send(batch);
        check(r.getSendStatus() == SendStatus.SEND_OK, "batch status " + r.getSendStatus());
        String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
        check(ids.length == count, "batch result lists " + count + " msgIds: " + r.getMsgId());
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(count, "batch messages delivered");
        Set<Integer> queues = new HashSet<>();
        Set<Long> offsets = new HashSet<>();
        for (MessageExt m : c.messages()) {
            queues.add(m.getQueueId());
            offsets.add(m.getQueueOffset());
            int i = Integer.parseInt(body(m).substring("batch-".length()));
            check("BatchKey".concat(String.valueOf(i)).equals(m.getKeys()), "batch message " + i + " keeps its key");
            check("TagBatch".equals(m.getTags()), "batch message " + i + " keeps its tag");
            check(m.getProperty("UNIQ_KEY").equals(ids[i]), "batch message " + i + " has msgId #" + i + " of the result");
        }
        check(queues.size() == 1, "a batch lands in one queue, got " + queues);
        check(offsets.size() == count && offsets.contains(0L) && offsets.contains((long) count - 1),
            "batch messages have consecutive queue offsets 0.." + (count - 1) + ", got " + offsets);
    }

    private void properties() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        Message m = new Message(topic, "TagProps", "props".getBytes(StandardCharsets.UTF_8));
        m.setKeys(List.of("KeyOne", "KeyTwo"));
        m.putUserProperty("cometPlain", "value1");
        m.putUserProperty("cometSpaces", "a value with spaces");
        m.putUserProperty("cometUnicode", "h\u00e9llo \u4e16\u754c");
        check(producer.send(m).getSendStatus() == SendStatus.SEND_OK, "send ok");
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(1, "message delivered");
        MessageExt got = c.messages().get(0);
        check("TagProps".equals(got.getTags()), "tag round-trips, got " + got.getTags());
        check("KeyOne KeyTwo".equals(got.getKeys()), "keys round-trip, got " + got.getKeys());
        check("value1".equals(got.getUserProperty("cometPlain")), "plain property, got " + got.getUserProperty("cometPlain"));
        check("a value with spaces".equals(got.getUserProperty("cometSpaces")),
            "property with spaces, got " + got.getUserProperty("cometSpaces"));
        check("h\u00e9llo \u4e16\u754c".equals(got.getUserProperty("cometUnicode")),
            "non-ASCII property, got " + got.getUserProperty("cometUnicode"));
        check(got.getBornTimestamp() > 0 && got.getStoreTimestamp() >= got.getBornTimestamp(),
            "born/store timestamps set and ordered");
        check(got.getBornHost() != null && got.getStoreHost() != null, "born and store hosts set");
    }

    private void compressedBody() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        StringBuilder sb = new StringBuilder();
        for (int i = 0; sb.length() < BIG_BODY_LEN; i++) {
            sb.append("comet compressible line ").append(i).append('\n');
        }
        byte[] body = sb.substring(0, BIG_BODY_LEN).getBytes(StandardCharsets.UTF_8);
        check(producer.send(new Message(topic, body)).getSendStatus() == SendStatus.SEND_OK, "send ok");
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(1, "message delivered");
        MessageExt got = c.messages().get(0);
        check(java.util.Arrays.equals(body, got.getBody()), "decompressed body equals the " + BIG_BODY_LEN + "-byte original");
        // Consumers clear COMPRESSED_FLAG once they inflate the body, so the evidence that the
        // client compressed it and the broker kept it compressed is the stored record's size.
        check(got.getStoreSize() < BIG_BODY_LEN,
            "stored record (" + got.getStoreSize() + " bytes, sysFlag " + got.getSysFlag() + ") is smaller than the body");
    }

    // ---------------------------------------------------------------- scenarios: push consumers

    private void clustering() throws Exception {
        createTopic(topic);
        Collector a = collector();
        Collector b = collector();
        TrackingAllocate ta = new TrackingAllocate();
        TrackingAllocate tb = new TrackingAllocate();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", a, c -> c.setAllocateMessageQueueStrategy(ta));
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", b, c -> c.setAllocateMessageQueueStrategy(tb));
        awaitBalanced(2, ta, tb);
        DefaultMQProducer producer = producer();
        int count = 40;
        for (int i = 0; i < count; i++) {
            sendOk(producer, new Message(topic, ("cluster-" + i).getBytes(StandardCharsets.UTF_8)));
        }
        await(() -> a.uniqueCount() + b.uniqueCount() >= count, "both consumers together received " + count);
        DefaultMQAdminExt admin = admin();
        awaitNoLag(admin);
        Set<String> union = new HashSet<>(a.bodies());
        union.addAll(b.bodies());
        check(union.size() == count, "every message delivered, got " + union.size());
        check(a.total() + b.total() == count, "every message delivered exactly once, deliveries " + (a.total() + b.total()));
        check(a.total() > 0 && b.total() > 0, "both consumers got messages: " + a.total() + "/" + b.total());
        for (MessageExt m : a.messages()) {
            check(ta.queueIds().contains(m.getQueueId()), "consumer A only sees its own queues");
        }
        for (MessageExt m : b.messages()) {
            check(tb.queueIds().contains(m.getQueueId()), "consumer B only sees its own queues");
        }
    }

    private void broadcasting() throws Exception {
        createTopic(topic);
        Collector a = collector();
        Collector b = collector();
        Consumer<DefaultMQPushConsumer> broadcast = MatrixRunner::broadcastingModel;
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", a, broadcast);
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", b, broadcast);
        DefaultMQProducer producer = producer();
        int count = 20;
        Set<String> bodies = new HashSet<>();
        for (int i = 0; i < count; i++) {
            String body = "broadcast-" + i;
            bodies.add(body);
            sendOk(producer, new Message(topic, body.getBytes(StandardCharsets.UTF_8)));
        }
        a.awaitUnique(count, "consumer A received every message");
        b.awaitUnique(count, "consumer B received every message");
        check(a.bodies().equals(bodies), "consumer A got exactly the sent bodies");
        check(b.bodies().equals(bodies), "consumer B got exactly the sent bodies");
    }

    private void orderly() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        int keys = 8;
        int perKey = 10;
        ConcurrentLinkedQueue<MessageExt> seen = new ConcurrentLinkedQueue<>();
        DefaultMQPushConsumer consumer = baseConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            seen.addAll(msgs);
            return ConsumeOrderlyStatus.SUCCESS;
        });
        startConsumer(consumer);
        Map<String, Integer> queueOfKey = new HashMap<>();
        for (int seq = 0; seq < perKey; seq++) {
            for (int k = 0; k < keys; k++) {
                String key = "order-" + k;
                Message m = new Message(topic, "TagOrder", key, (key + ":" + seq).getBytes(StandardCharsets.UTF_8));
                SendResult r = producer.send(m, (mqs, msg, arg) -> mqs.get(Math.floorMod(arg.hashCode(), mqs.size())), key);
                check(r.getSendStatus() == SendStatus.SEND_OK, "send " + key + ":" + seq);
                Integer prev = queueOfKey.putIfAbsent(key, r.getMessageQueue().getQueueId());
                check(prev == null || prev == r.getMessageQueue().getQueueId(), "selector keeps " + key + " on one queue");
            }
        }
        await(() -> seen.size() >= keys * perKey, "orderly consumer received " + keys * perKey);
        Map<String, Integer> nextSeq = new HashMap<>();
        Map<Integer, Long> lastOffset = new HashMap<>();
        for (MessageExt m : seen) {
            String[] parts = body(m).split(":");
            String key = parts[0];
            int seq = Integer.parseInt(parts[1]);
            int expected = nextSeq.getOrDefault(key, 0);
            check(seq == expected, key + " delivered in order: expected seq " + expected + ", got " + seq);
            nextSeq.put(key, seq + 1);
            check(queueOfKey.get(key) == m.getQueueId(), key + " delivered from its selected queue");
            Long prev = lastOffset.put(m.getQueueId(), m.getQueueOffset());
            check(prev == null || m.getQueueOffset() == prev + 1,
                "queue " + m.getQueueId() + " offsets consecutive in delivery order: " + prev + " then " + m.getQueueOffset());
        }
        check(seen.size() == keys * perKey, "no duplicates, got " + seen.size());
    }

    private void retryDlq() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        Map<String, Set<Integer>> attempts = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<String> unexpected = new ConcurrentLinkedQueue<>();
        DefaultMQPushConsumer consumer = baseConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setMaxReconsumeTimes(MAX_RECONSUME);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                if (!attempts.computeIfAbsent(m.getKeys(), k -> ConcurrentHashMap.newKeySet()).add(m.getReconsumeTimes())
                    || m.getReconsumeTimes() > MAX_RECONSUME) {
                    unexpected.add(m.getKeys() + " reconsumeTimes=" + m.getReconsumeTimes());
                }
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        startConsumer(consumer);
        List<String> keys = List.of("dlq-key-0", "dlq-key-1");
        for (String key : keys) {
            sendOk(producer, new Message(topic, "TagDlq", key, ("dlq-body-" + key).getBytes(StandardCharsets.UTF_8)));
        }
        Set<Integer> all = new HashSet<>();
        for (int i = 0; i <= MAX_RECONSUME; i++) {
            all.add(i);
        }
        await(() -> keys.stream().allMatch(k -> all.equals(attempts.get(k))),
            "each message delivered with reconsumeTimes 0.." + MAX_RECONSUME + " (" + attempts + ")");
        String dlq = "%DLQ%" + group;
        List<MessageExt> dead = pullAll(dlq, keys.size());
        Set<String> deadKeys = new HashSet<>();
        for (MessageExt m : dead) {
            deadKeys.add(m.getKeys());
            check(dlq.equals(m.getTopic()), "dead message topic is " + dlq + ", got " + m.getTopic());
            check(body(m).equals("dlq-body-" + m.getKeys()), "dead message keeps its body");
            check(topic.equals(m.getProperty("RETRY_TOPIC")), "dead message records its original topic in RETRY_TOPIC");
        }
        check(deadKeys.equals(new HashSet<>(keys)), "both messages are in " + dlq + ", got " + deadKeys);
        check(unexpected.isEmpty(), "no delivery repeated or beyond maxReconsumeTimes: " + unexpected);
    }

    private void delayLevel() throws Exception {
        createTopic(topic);
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        DefaultMQProducer producer = producer();
        Message m = new Message(topic, "TagDelay", "delayed".getBytes(StandardCharsets.UTF_8));
        m.setDelayTimeLevel(DELAY_LEVEL);
        sendOk(producer, m);
        c.awaitUnique(1, "delayed message delivered");
        MessageExt got = c.messages().get(0);
        long waited = got.getStoreTimestamp() - got.getBornTimestamp();
        check(waited >= DELAY_LEVEL_MIN_MS, "stored in " + topic + " at least 5000 ms after birth, got " + waited + " ms");
        check(topic.equals(got.getTopic()), "delivered on the real topic, got " + got.getTopic());
        check("TagDelay".equals(got.getTags()), "tag survives the schedule topic");
    }

    /**
     * A 5.x timer message: Message#setDeliverTimeMs (looked up by reflection, so the runner still
     * compiles against 4.9.8, whose Message has no such method) three seconds ahead. The broker
     * parks it and stores it in the real topic only once that time has come, so the consumer
     * cannot receive it earlier; it keeps TIMER_DELIVER_MS and the broker's TIMER_OUT_MS.
     */
    private void timerMessage() throws Exception {
        java.lang.reflect.Method setDeliverTimeMs;
        try {
            setDeliverTimeMs = Message.class.getMethod("setDeliverTimeMs", long.class);
        } catch (NoSuchMethodException e) {
            throw new IllegalStateException("this client has no Message#setDeliverTimeMs (a 5.x API)");
        }
        createTopic(topic);
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        DefaultMQProducer producer = producer();
        Message m = new Message(topic, "TagTimer", "timer".getBytes(StandardCharsets.UTF_8));
        long deliverAt = System.currentTimeMillis() + TIMER_DELAY_MS;
        setDeliverTimeMs.invoke(m, deliverAt);
        sendOk(producer, m);
        c.awaitUnique(1, "timer message delivered");
        MessageExt got = c.messages().get(0);
        check(got.getStoreTimestamp() >= deliverAt,
            "stored in " + topic + " at or after its delivery time, got " + (got.getStoreTimestamp() - deliverAt) + " ms after it");
        check(topic.equals(got.getTopic()), "delivered on the real topic, got " + got.getTopic());
        check("TagTimer".equals(got.getTags()), "tag survives the timer topic");
        check(String.valueOf(deliverAt).equals(got.getProperty("TIMER_DELIVER_MS")),
            "TIMER_DELIVER_MS kept, got " + got.getProperty("TIMER_DELIVER_MS"));
        check(got.getProperty("TIMER_OUT_MS") != null, "the broker's TIMER_OUT_MS is kept");
        // Apache stores the delivered copy with the parked record's properties string, so
        // REAL_TOPIC stays, as do the wheel's TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS.
        check(topic.equals(got.getProperty("REAL_TOPIC")), "REAL_TOPIC kept, got " + got.getProperty("REAL_TOPIC"));
        check(got.getProperty("TIMER_ENQUEUE_MS") != null, "TIMER_ENQUEUE_MS set");
        check(got.getProperty("TIMER_DEQUEUE_MS") != null, "TIMER_DEQUEUE_MS set");
    }

    /**
     * POP consumption as {@code mqadmin setConsumeMode -m POP -q 8} sets it up: the group is
     * switched to POP on every master, and a push consumer that leaves rebalancing to the broker
     * (clientRebalance=false, a 5.x API reached by reflection like the mode itself) pops every
     * message. One message fails once and must come back.
     */
    private void popConsume() throws Exception {
        Class<?> modeClass;
        java.lang.reflect.Method setClientRebalance;
        try {
            modeClass = Class.forName("org.apache.rocketmq.common.message.MessageRequestMode");
            setClientRebalance = DefaultMQPushConsumer.class.getMethod("setClientRebalance", boolean.class);
        } catch (ClassNotFoundException | NoSuchMethodException e) {
            throw new IllegalStateException("this client has no POP consumption (a 5.x API)");
        }
        java.lang.reflect.Method setMode = null;
        for (java.lang.reflect.Method m : DefaultMQAdminExt.class.getMethods()) {
            if (m.getName().equals("setMessageRequestMode") && m.getParameterCount() == 6) {
                setMode = m;
            }
        }
        check(setMode != null, "DefaultMQAdminExt#setMessageRequestMode exists");
        createTopic(topic);
        DefaultMQAdminExt admin = admin();
        @SuppressWarnings({"unchecked", "rawtypes"})
        Object pop = Enum.valueOf((Class) modeClass, "POP");
        int masters = 0;
        for (var broker : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            String addr = broker.getBrokerAddrs().get(0L);
            if (addr != null) {
                setMode.invoke(admin, addr, topic, group, pop, 8, 10_000L);
                masters++;
            }
        }
        check(masters > 0, "the group is switched to POP on a master");
        DefaultMQProducer producer = producer();
        int count = 20;
        Set<String> sent = sendNumbered(producer, "pop-", count);
        Collector c = collector();
        AtomicInteger failures = new AtomicInteger();
        DefaultMQPushConsumer consumer = baseConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        setClientRebalance.invoke(consumer, false);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                if (body(m).equals("pop-0") && failures.getAndIncrement() == 0) {
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            msgs.forEach(c::add);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        startConsumer(consumer);
        c.awaitUnique(count, "every message popped and consumed");
        check(c.bodies().equals(sent), "consumed bodies equal the sends: " + c.bodies());
        check(failures.get() >= 2, "the message that failed once came back, deliveries " + failures.get());
        for (MessageExt m : c.messages()) {
            check(m.getProperty("POP_CK") != null, body(m) + " carries its receipt handle POP_CK");
        }
    }

    private void fromFirstOffset() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        Set<String> before = sendNumbered(producer, "first-before-", 8);
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(before.size(), "messages sent before the group existed are delivered");
        Set<String> after = sendNumbered(producer, "first-after-", 4);
        Set<String> all = new HashSet<>(before);
        all.addAll(after);
        c.awaitUnique(all.size(), "messages sent afterwards are delivered");
        check(c.bodies().equals(all), "delivered exactly what was sent");
    }

    /**
     * LAST_OFFSET for a new group. Neither client version sends setZeroIfNotFound, so a broker
     * that still holds a queue's first message answers offset 0 to QUERY_CONSUMER_OFFSET and the
     * consumer starts there (Apache's rule); the client's own LAST_OFFSET arithmetic (GET_MAX_OFFSET)
     * is checked directly through maxOffset.
     */
    private void fromLastOffset() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        Map<Integer, Long> perQueue = new HashMap<>();
        Set<String> before = new HashSet<>();
        for (int i = 0; i < 8; i++) {
            String body = "last-before-" + i;
            SendResult r = sendOk(producer, new Message(topic, body.getBytes(StandardCharsets.UTF_8)));
            perQueue.merge(r.getMessageQueue().getQueueId(), 1L, Long::sum);
            before.add(body);
        }
        Collector c = collector();
        TrackingAllocate t = new TrackingAllocate();
        DefaultMQPushConsumer consumer =
            pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, "*", c, x -> x.setAllocateMessageQueueStrategy(t));
        awaitBalanced(1, t);
        for (MessageQueue mq : t.lastAllocation()) {
            long max = consumer.maxOffset(mq);
            check(max == perQueue.getOrDefault(mq.getQueueId(), 0L),
                "maxOffset of queue " + mq.getQueueId() + " is " + perQueue.getOrDefault(mq.getQueueId(), 0L) + ", got " + max);
        }
        Set<String> after = sendNumbered(producer, "last-after-", 4);
        Set<String> all = new HashSet<>(before);
        all.addAll(after);
        c.awaitUnique(all.size(), "new group starts at offset 0 of queues whose first message is present");
        check(c.bodies().equals(all), "delivered exactly what was sent");
    }

    /** TIMESTAMP for a new group; see {@link #fromLastOffset} for why the consumer starts at 0. */
    private void fromTimestamp() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        Map<Integer, Long> beforePerQueue = new HashMap<>();
        Set<String> before = new HashSet<>();
        for (int i = 0; i < 8; i++) {
            String body = "ts-before-" + i;
            SendResult r = sendOk(producer, new Message(topic, body.getBytes(StandardCharsets.UTF_8)));
            beforePerQueue.merge(r.getMessageQueue().getQueueId(), 1L, Long::sum);
            before.add(body);
        }
        // consumeTimestamp has a one-second resolution: the boundary is the next whole second.
        long boundary = (System.currentTimeMillis() / 1000 + 1) * 1000;
        while (System.currentTimeMillis() < boundary) {
            Thread.sleep(Math.max(1, boundary - System.currentTimeMillis()));
        }
        Set<String> after = sendNumbered(producer, "ts-after-", 4);
        Collector c = collector();
        TrackingAllocate t = new TrackingAllocate();
        DefaultMQPushConsumer consumer = pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, "*", c, x -> {
            x.setAllocateMessageQueueStrategy(t);
            x.setConsumeTimestamp(new SimpleDateFormat("yyyyMMddHHmmss").format(new Date(boundary)));
        });
        awaitBalanced(1, t);
        for (MessageQueue mq : t.lastAllocation()) {
            long found = consumer.searchOffset(mq, boundary);
            long expected = beforePerQueue.getOrDefault(mq.getQueueId(), 0L);
            check(found == expected, "searchOffset(queue " + mq.getQueueId() + ", boundary) is " + expected + ", got " + found);
        }
        Set<String> all = new HashSet<>(before);
        all.addAll(after);
        c.awaitUnique(all.size(), "new group starts at offset 0 of queues whose first message is present");
        check(c.bodies().equals(all), "delivered exactly what was sent");
    }

    private void tagFilter() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        Set<String> wanted = new HashSet<>();
        String[] tags = {"TagA", "TagC", "TagB", "TagC", "TagA", "TagB", "TagC", "TagA"};
        for (int i = 0; i < tags.length; i++) {
            String body = tags[i] + "-" + i;
            if (!tags[i].equals("TagC")) {
                wanted.add(body);
            }
            sendOk(producer, new Message(topic, tags[i], body.getBytes(StandardCharsets.UTF_8)));
        }
        // The last message of every queue is a wanted one: once all wanted ones are in, every
        // TagC message has been passed over by the broker's or the client's filter.
        for (int q = 0; q < QUEUES; q++) {
            String body = "TagB-tail-" + q;
            wanted.add(body);
            int queueId = q;
            producer.send(new Message(topic, "TagB", body.getBytes(StandardCharsets.UTF_8)),
                (mqs, msg, arg) -> mqs.get(queueId % mqs.size()), null);
        }
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "TagA || TagB", c, x -> {
            x.setConsumeThreadMin(1);
            x.setConsumeThreadMax(1);
        });
        c.awaitUnique(wanted.size(), "every TagA/TagB message delivered");
        check(c.bodies().equals(wanted), "exactly the TagA/TagB messages delivered, got " + c.bodies());
        for (MessageExt m : c.messages()) {
            check(m.getTags().equals("TagA") || m.getTags().equals("TagB"), "delivered tag " + m.getTags());
        }
    }

    // ---------------------------------------------------------------- scenarios: pull consumers

    private void litePullSeek() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        int count = 10;
        MessageQueue target = null;
        for (int i = 0; i < count; i++) {
            SendResult r = producer.send(new Message(topic, ("seek-" + i).getBytes(StandardCharsets.UTF_8)),
                (mqs, msg, arg) -> mqs.get(0), null);
            check(r.getSendStatus() == SendStatus.SEND_OK, "send " + i);
            target = r.getMessageQueue();
        }
        DefaultLitePullConsumer lite = new DefaultLitePullConsumer(group);
        configureClient(lite);
        lite.setAutoCommit(false);
        lite.setPullBatchSize(count);
        lite.start();
        shutdowns.add(lite::shutdown);
        Collection<MessageQueue> mqs = lite.fetchMessageQueues(topic);
        check(mqs.size() == QUEUES, "fetchMessageQueues lists " + QUEUES + " queues, got " + mqs.size());
        check(mqs.contains(target), "fetchMessageQueues lists the queue written to");
        lite.assign(List.of(target));
        // Drain the queue first: assign starts pulling at once, so a seek issued right away races
        // with a pull already in flight (in any broker). After the drain the only pull in flight
        // waits at the end of the queue, and seeks are deterministic.
        List<MessageExt> drained = pollAtLeast(lite, count);
        check(drained.size() == count, "assign then poll yields all " + count + ", got " + drained.size());
        for (int i = 0; i < count; i++) {
            check(drained.get(i).getQueueOffset() == i, "drained message " + i + " has offset " + i);
        }
        lite.seek(target, 5);
        List<MessageExt> got = pollAtLeast(lite, count - 5);
        check(got.size() == count - 5, "seek(5) then poll yields " + (count - 5) + ", got " + got.size());
        for (int i = 0; i < got.size(); i++) {
            check(got.get(i).getQueueOffset() == 5 + i, "message " + i + " after seek(5) has offset " + (5 + i));
            check(body(got.get(i)).equals("seek-" + (5 + i)), "message at offset " + (5 + i) + " has its body");
        }
        lite.seek(target, 2);
        List<MessageExt> again = pollAtLeast(lite, 1);
        check(again.get(0).getQueueOffset() == 2, "seek(2) rewinds: first offset " + again.get(0).getQueueOffset());
        check(body(again.get(0)).equals("seek-2"), "seek(2) rewinds to body seek-2");
    }

    private void pullOffsetRestart() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        int count = 10;
        int committed = 4;
        MessageQueue mq = null;
        for (int i = 0; i < count; i++) {
            SendResult r = producer.send(new Message(topic, ("pull-" + i).getBytes(StandardCharsets.UTF_8)),
                (mqs, msg, arg) -> mqs.get(0), null);
            check(r.getSendStatus() == SendStatus.SEND_OK, "send " + i);
            mq = r.getMessageQueue();
        }
        DefaultMQPullConsumer first = pullConsumer(group);
        PullResult r = first.pull(mq, "*", 0, committed);
        check(r.getPullStatus() == PullStatus.FOUND, "first pull finds messages, got " + r.getPullStatus());
        check(r.getMsgFoundList().size() == committed, "pull of " + committed + " returns " + committed + ", got " + r.getMsgFoundList().size());
        check(r.getNextBeginOffset() == committed, "nextBeginOffset " + committed + ", got " + r.getNextBeginOffset());
        check(r.getMaxOffset() == count, "maxOffset " + count + ", got " + r.getMaxOffset());
        first.updateConsumeOffset(mq, r.getNextBeginOffset());
        first.getOffsetStore().persist(mq);
        first.shutdown();
        DefaultMQPullConsumer second = pullConsumer(group);
        long stored = second.fetchConsumeOffset(mq, true);
        check(stored == committed, "restarted consumer reads committed offset " + committed + ", got " + stored);
        PullResult rest = second.pull(mq, "*", stored, count);
        check(rest.getPullStatus() == PullStatus.FOUND, "second pull finds messages");
        List<MessageExt> msgs = rest.getMsgFoundList();
        check(msgs.size() == count - committed, "second pull returns the " + (count - committed) + " unconsumed, got " + msgs.size());
        for (int i = 0; i < msgs.size(); i++) {
            check(body(msgs.get(i)).equals("pull-" + (committed + i)), "second pull message " + i + " is pull-" + (committed + i));
        }
        PullResult end = second.pull(mq, "*", count, count);
        check(end.getPullStatus() == PullStatus.NO_NEW_MSG, "pull at the end answers NO_NEW_MSG, got " + end.getPullStatus());
    }

    // ---------------------------------------------------------------- scenarios: transactions

    /**
     * One half message committed by the local transaction, one rolled back, one left UNKNOWN and
     * committed when the broker checks back: the consumer must get exactly the two committed ones,
     * the broker must ask about the UNKNOWN one only, and the rolled-back one must never reach the
     * topic's queues (their max offsets add up to 2).
     */
    private void transactions() throws Exception {
        createTopic(topic);
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        Map<String, LocalTransactionState> firstAnswer = Map.of(
            "txn-commit", LocalTransactionState.COMMIT_MESSAGE,
            "txn-rollback", LocalTransactionState.ROLLBACK_MESSAGE,
            "txn-unknown", LocalTransactionState.UNKNOW);
        ConcurrentLinkedQueue<String> checkedIds = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<String> checkedBodies = new ConcurrentLinkedQueue<>();
        TransactionMQProducer producer = new TransactionMQProducer("MxP_" + scenario.replace('-', '_') + "_" + suffix);
        configureClient(producer);
        producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return firstAnswer.getOrDefault(new String(msg.getBody(), StandardCharsets.UTF_8),
                    LocalTransactionState.ROLLBACK_MESSAGE);
            }

            /** The local transactions' final outcome: the UNKNOWN one has committed by now. */
            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checkedIds.add(String.valueOf(msg.getProperty("UNIQ_KEY")));
                checkedBodies.add(body(msg));
                return "txn-rollback".equals(body(msg)) ? LocalTransactionState.ROLLBACK_MESSAGE
                    : LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        producer.start();
        shutdowns.add(producer::shutdown);
        Map<String, String> idOf = new HashMap<>();
        for (String b : List.of("txn-commit", "txn-rollback", "txn-unknown")) {
            TransactionSendResult r = producer.sendMessageInTransaction(
                new Message(topic, "TagTxn", b.getBytes(StandardCharsets.UTF_8)), null);
            check(r.getSendStatus() == SendStatus.SEND_OK, b + ": half message stored, got " + r.getSendStatus());
            check(r.getLocalTransactionState() == firstAnswer.get(b),
                b + ": local transaction state " + firstAnswer.get(b) + ", got " + r.getLocalTransactionState());
            check(notEmpty(r.getMsgId()), b + ": send result has a msgId");
            idOf.put(b, r.getMsgId());
        }
        c.awaitUnique(2, "the committed and the checked-then-committed messages delivered");
        check(c.bodies().equals(Set.of("txn-commit", "txn-unknown")),
            "exactly the committed messages delivered, got " + c.bodies());
        for (MessageExt m : c.messages()) {
            check(topic.equals(m.getTopic()), "delivered on the real topic, got " + m.getTopic());
            check(Objects.equals(idOf.get(body(m)), m.getProperty("UNIQ_KEY")),
                body(m) + " delivered with the msgId of its half message");
        }
        check(checkedIds.contains(idOf.get("txn-unknown")),
            "the broker asked the producer about the UNKNOWN transaction, asked about " + checkedBodies);
        check(checkedBodies.stream().allMatch("txn-unknown"::equals),
            "only the UNKNOWN transaction was checked, asked about " + checkedBodies);
        DefaultMQPullConsumer puller = pullConsumer("MxPull_" + suffix);
        long total = 0;
        for (MessageQueue mq : puller.fetchSubscribeMessageQueues(topic)) {
            total += puller.maxOffset(mq);
        }
        check(total == 2, "the topic's queues hold the 2 committed messages only, max offsets add up to " + total);
    }

    // ---------------------------------------------------------------- scenarios: ACL and TLS

    /** Signed sends and a signed consumer on a topic and group the ordinary account is granted. */
    private void aclSendConsume() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        Set<String> sent = sendNumbered(producer, "acl-", 8);
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(sent.size(), "signed consumer received the signed sends");
        check(c.bodies().equals(sent), "delivered exactly what was sent");
        check(c.total() == sent.size(), "every message delivered once, deliveries " + c.total());
    }

    /**
     * A granted send first (the account works), then two refusals: a topic outside the account's
     * topicPerms, and a producer signing with a wrong secret key.
     */
    private void aclDenied() throws Exception {
        String forbidden = "MxT_acl_forbidden_" + suffix;
        createTopic(topic);
        createTopic(forbidden);
        DefaultMQProducer producer = producer();
        sendOk(producer, new Message(topic, "granted".getBytes(StandardCharsets.UTF_8)));
        expectDenied(() -> producer.send(new Message(forbidden, "forbidden".getBytes(StandardCharsets.UTF_8))),
            forbidden, "send to " + forbidden + " (not in topicPerms)");
        DefaultMQProducer wrongSecret = producer(aclHook(ACL_USER_ENV, "-wrong"), "MxP_acl_wrong_" + suffix);
        expectDenied(() -> wrongSecret.send(new Message(topic, "wrong-secret".getBytes(StandardCharsets.UTF_8))),
            "signature", "send signed with a wrong secret key");
    }

    private interface Send {
        SendResult call() throws Exception;
    }

    /** The send must fail with NO_PERMISSION and an error text that mentions {@code mention}. */
    private void expectDenied(Send send, String mention, String what) {
        SendResult accepted;
        try {
            accepted = send.call();
        } catch (Exception e) {
            int code = 0;
            StringBuilder text = new StringBuilder();
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (code == 0 && t instanceof MQBrokerException b) {
                    code = b.getResponseCode();
                } else if (code == 0 && t instanceof MQClientException ce) {
                    code = ce.getResponseCode();
                }
                text.append(oneLine(t)).append(" / ");
            }
            check(code == NO_PERMISSION, what + " fails with NO_PERMISSION (16), got code " + code + ": " + text);
            check(text.toString().toLowerCase().contains(mention.toLowerCase()),
                what + ": the error names " + mention + ", got: " + text);
            return;
        }
        check(false, what + " was accepted: " + accepted);
    }

    /** send-sync and a push consumer over a TLS connection (run with -Dtls.enable=true). */
    private void tlsSendConsume() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        check(producer.isUseTLS(), "the client runs with TLS (-Dtls.enable=true)");
        Set<String> sent = sendNumbered(producer, "tls-", 8);
        Collector c = collector();
        DefaultMQPushConsumer consumer = pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        check(consumer.isUseTLS(), "the consumer runs with TLS");
        c.awaitUnique(sent.size(), "messages delivered over TLS");
        check(c.bodies().equals(sent), "delivered exactly what was sent");
    }

    // ---------------------------------------------------------------- scenarios: admin

    private void adminTopic() throws Exception {
        DefaultMQAdminExt admin = admin();
        int queues = 3;
        String brokerAddr = null;
        String brokerName = null;
        var cluster = admin.examineBrokerClusterInfo();
        for (var entry : cluster.getBrokerAddrTable().entrySet()) {
            brokerName = entry.getKey();
            brokerAddr = entry.getValue().getBrokerAddrs().get(0L);
        }
        check(brokerAddr != null, "cluster info lists a master broker address");
        TopicConfig tc = new TopicConfig(topic, queues, queues, PERM_READ_WRITE);
        admin.createAndUpdateTopicConfig(brokerAddr, tc);
        await(() -> {
            try {
                return admin.examineTopicRouteInfo(topic) != null;
            } catch (Exception e) {
                return false;
            }
        }, "the created topic has a route");
        var route = admin.examineTopicRouteInfo(topic);
        check(route.getQueueDatas().size() == 1, "route has one queue data, got " + route.getQueueDatas().size());
        var qd = route.getQueueDatas().get(0);
        check(qd.getReadQueueNums() == queues && qd.getWriteQueueNums() == queues,
            "route queue counts " + queues + ", got " + qd.getReadQueueNums() + "/" + qd.getWriteQueueNums());
        check(qd.getPerm() == PERM_READ_WRITE, "route perm 6, got " + qd.getPerm());
        check(Objects.equals(qd.getBrokerName(), brokerName), "queue data names the broker");
        check(route.getBrokerDatas().size() == 1, "route has one broker data");
        check(brokerAddr.equals(route.getBrokerDatas().get(0).getBrokerAddrs().get(0L)), "route broker address equals cluster info");
        var list = admin.fetchAllTopicList();
        check(list.getTopicList().contains(topic), "topic list contains the created topic");
        var configured = admin.examineTopicConfig(brokerAddr, topic);
        check(configured != null && configured.getReadQueueNums() == queues, "broker reports the topic config");
        DefaultMQProducer producer = producer();
        SendResult r = sendOk(producer, new Message(topic, "admin-topic".getBytes(StandardCharsets.UTF_8)));
        check(r.getMessageQueue().getQueueId() < queues, "send uses one of the " + queues + " queues");
    }

    private void adminConsumerProgress() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        Map<Integer, Long> perQueue = new HashMap<>();
        Set<String> first = new HashSet<>();
        for (int i = 0; i < 10; i++) {
            String body = "progress-" + i;
            SendResult r = sendOk(producer, new Message(topic, body.getBytes(StandardCharsets.UTF_8)));
            perQueue.merge(r.getMessageQueue().getQueueId(), 1L, Long::sum);
            first.add(body);
        }
        Collector c = collector();
        DefaultMQPushConsumer consumer = pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(first.size(), "first messages consumed");
        DefaultMQAdminExt admin = admin();
        awaitNoLag(admin);
        consumer.shutdown();
        int unconsumed = 6;
        for (int i = 0; i < unconsumed; i++) {
            SendResult r = sendOk(producer, new Message(topic, ("progress-late-" + i).getBytes(StandardCharsets.UTF_8)));
            perQueue.merge(r.getMessageQueue().getQueueId(), 1L, Long::sum);
        }
        var stats = admin.examineConsumeStats(group);
        check(stats.computeTotalDiff() == unconsumed, "lag equals " + unconsumed + " unconsumed, got " + stats.computeTotalDiff());
        long lag = 0;
        for (var e : stats.getOffsetTable().entrySet()) {
            MessageQueue mq = e.getKey();
            var w = e.getValue();
            if (!mq.getTopic().equals(topic)) {
                continue;
            }
            check(w.getBrokerOffset() == perQueue.getOrDefault(mq.getQueueId(), 0L),
                "broker offset of queue " + mq.getQueueId() + " is " + perQueue.getOrDefault(mq.getQueueId(), 0L) + ", got " + w.getBrokerOffset());
            lag += w.getBrokerOffset() - w.getConsumerOffset();
        }
        check(lag == unconsumed, "sum of per-queue lag is " + unconsumed + ", got " + lag);
    }

    /**
     * Message trace with the Java client's own tracing (enableMsgTrace) against the broker: the
     * Pub, SubBefore and SubAfter records of a message are found in RMQ_SYS_TRACE_TOPIC by its
     * msgId, decoded by the Java decoder (what mqadmin queryMsgTraceById does) and by Comet's
     * {@code comet msg trace --id} (the binary named by MATRIX_COMET_BIN).
     */
    private void msgTrace() throws Exception {
        String cometBin = System.getenv("MATRIX_COMET_BIN");
        check(notEmpty(cometBin), "MATRIX_COMET_BIN names the comet binary");
        createTopic(topic);
        String producerGroup = "MxP_msg_trace_" + suffix;
        DefaultMQProducer producer = new DefaultMQProducer(producerGroup, null, true, null);
        configureClient(producer);
        producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
        producer.start();
        shutdowns.add(producer::shutdown);
        SendResult sent = sendOk(producer, new Message(topic, "TagTrace", "TraceKey_" + suffix,
            "traced".getBytes(StandardCharsets.UTF_8)));
        String msgId = sent.getMsgId();
        Collector c = collector();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, null, new AllocateMessageQueueAveragely(), true, null);
        configureClient(consumer);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(c::add);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        startConsumer(consumer);
        c.awaitUnique(1, "traced message delivered");

        DefaultMQAdminExt admin = admin();
        Set<String> wanted = Set.of("Pub", "SubBefore", "SubAfter");
        AtomicReference<Set<String>> javaTypes = new AtomicReference<>(Set.of());
        await(() -> {
            try {
                Set<String> types = new HashSet<>();
                for (MessageExt m : admin.queryMessage("RMQ_SYS_TRACE_TOPIC", msgId, 64, 0, Long.MAX_VALUE)
                    .getMessageList()) {
                    for (TraceContext t : TraceDataEncoder.decoderFromTraceDataString(body(m))) {
                        if (msgId.equals(t.getTraceBeans().get(0).getMsgId())) {
                            types.add(t.getTraceType().name());
                        }
                    }
                }
                javaTypes.set(types);
                return types.containsAll(wanted);
            } catch (Exception e) {
                return false;
            }
        }, "the Java decoder finds Pub, SubBefore and SubAfter of " + msgId);
        check(javaTypes.get().containsAll(wanted), "Java decoded " + javaTypes.get());

        Process comet = new ProcessBuilder(cometBin, "msg", "trace", "-n", namesrv, "--id", msgId, "--json")
            .redirectErrorStream(true).start();
        String shown = new String(comet.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        check(comet.waitFor(STEP_TIMEOUT_MS, TimeUnit.MILLISECONDS) && comet.exitValue() == 0,
            "comet msg trace exited 0: " + shown);
        for (String type : wanted) {
            check(shown.contains("\"type\":\"" + type + "\""), "comet msg trace shows " + type + ": " + shown);
        }
        check(shown.contains("\"group\":\"" + producerGroup + "\""), "comet shows the producer group: " + shown);
        check(shown.contains("\"group\":\"" + group + "\""), "comet shows the consumer group: " + shown);
        check(shown.contains("\"tags\":\"TagTrace\""), "comet shows the tags: " + shown);
    }

    private void adminQueryMessage() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        long begin = System.currentTimeMillis() - 60_000;
        Map<String, SendResult> byKey = new HashMap<>();
        for (int i = 0; i < 3; i++) {
            String key = "QueryKey" + i + "_" + suffix;
            byKey.put(key, sendOk(producer, new Message(topic, "TagQ", key, ("query-" + i).getBytes(StandardCharsets.UTF_8))));
        }
        DefaultMQAdminExt admin = admin();
        String key = "QueryKey1_" + suffix;
        AtomicReference<List<MessageExt>> found = new AtomicReference<>(List.of());
        await(() -> {
            try {
                found.set(admin.queryMessage(topic, key, 32, begin, System.currentTimeMillis() + 60_000).getMessageList());
                return !found.get().isEmpty();
            } catch (Exception e) {
                return false;
            }
        }, "query by key " + key + " finds the message");
        check(found.get().size() == 1, "query by key finds exactly one message, got " + found.get().size());
        check(body(found.get().get(0)).equals("query-1"), "query by key returns its body");
        SendResult sr = byKey.get(key);
        MessageExt byUniq = admin.viewMessage(topic, sr.getMsgId());
        check(byUniq != null && body(byUniq).equals("query-1"), "view by msgId (unique key) returns the message");
        MessageExt byOffset = admin.viewMessage(topic, sr.getOffsetMsgId());
        check(byOffset != null && body(byOffset).equals("query-1"), "view by offsetMsgId returns the message");
        check(key.equals(byOffset.getKeys()), "viewed message keeps its key");
    }

    private void adminResetOffset() throws Exception {
        createTopic(topic);
        DefaultMQProducer producer = producer();
        Set<String> early = sendNumbered(producer, "reset-early-", 6);
        long lastEarlyStore = 0;
        // Separate the two halves in store time by at least a few milliseconds.
        long boundary = System.currentTimeMillis() + 5;
        while (System.currentTimeMillis() <= boundary) {
            Thread.sleep(1);
        }
        Set<String> late = sendNumbered(producer, "reset-late-", 4);
        Collector c = collector();
        pushConsumer(group, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "*", c, null);
        c.awaitUnique(early.size() + late.size(), "all messages consumed once");
        DefaultMQAdminExt admin = admin();
        awaitNoLag(admin);
        for (MessageExt m : c.messages()) {
            if (early.contains(body(m))) {
                lastEarlyStore = Math.max(lastEarlyStore, m.getStoreTimestamp());
            }
        }
        check(lastEarlyStore <= boundary, "early messages stored before the boundary");
        int before = c.total();
        Map<MessageQueue, Long> reset = admin.resetOffsetByTimestamp(topic, group, boundary, true);
        check(reset != null && !reset.isEmpty(), "reset returns the new offsets");
        await(() -> c.total() >= before + late.size(), "consumer re-delivers the " + late.size() + " messages after the reset time");
        Map<String, Integer> counts = c.deliveryCounts();
        for (String b : late) {
            check(counts.getOrDefault(b, 0) == 2, b + " delivered twice (before and after the reset), got " + counts.get(b));
        }
        for (String b : early) {
            check(counts.getOrDefault(b, 0) == 1, b + " not re-delivered, got " + counts.get(b));
        }
    }

    // ---------------------------------------------------------------- helpers

    private void check(boolean ok, String what) {
        checks++;
        if (!ok) {
            throw new CheckFailed(what);
        }
    }

    private void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                check(false, what + " (timed out after " + STEP_TIMEOUT_MS + " ms" + (lastStatsError.isEmpty() ? "" : "; last consume stats: " + lastStatsError) + ")");
            }
            Thread.sleep(POLL_MS);
        }
        checks++;
        trace("done: " + what);
    }

    /** With -Dmatrix.trace=true, prints the time since start of every completed wait (stderr). */
    private static void trace(String what) {
        if (Boolean.getBoolean("matrix.trace")) {
            System.err.println("[" + (System.nanoTime() - STARTED_NANOS) / 1_000_000 + " ms] " + what);
        }
    }

    private String instanceName() {
        return "mx" + ProcessHandle.current().pid() + "_" + instances.incrementAndGet();
    }

    private void configureClient(org.apache.rocketmq.client.ClientConfig config) {
        config.setNamesrvAddr(namesrv);
        config.setInstanceName(instanceName());
        config.setVipChannelEnabled(false);
        config.setPersistConsumerOffsetInterval(PERSIST_OFFSET_INTERVAL_MS);
    }

    private DefaultMQProducer producer() throws Exception {
        return producer(userHook, "MxP_" + scenario.replace('-', '_') + "_" + suffix);
    }

    private DefaultMQProducer producer(RPCHook hook, String producerGroup) throws Exception {
        DefaultMQProducer p = hook == null ? new DefaultMQProducer(producerGroup) : new DefaultMQProducer(producerGroup, hook);
        configureClient(p);
        p.setSendMsgTimeout(SEND_TIMEOUT_MS);
        p.start();
        shutdowns.add(p::shutdown);
        return p;
    }

    private DefaultMQAdminExt admin() throws Exception {
        DefaultMQAdminExt a = adminHook == null ? new DefaultMQAdminExt(SEND_TIMEOUT_MS)
            : new DefaultMQAdminExt(adminHook, SEND_TIMEOUT_MS);
        configureClient(a);
        a.setAdminExtGroup("MxA_" + suffix + "_" + instances.incrementAndGet());
        a.start();
        shutdowns.add(a::shutdown);
        return a;
    }

    private DefaultMQPullConsumer pullConsumer(String group) throws Exception {
        DefaultMQPullConsumer c = userHook == null ? new DefaultMQPullConsumer(group) : new DefaultMQPullConsumer(group, userHook);
        configureClient(c);
        c.start();
        shutdowns.add(c::shutdown);
        return c;
    }

    private DefaultMQPushConsumer baseConsumer(String group, ConsumeFromWhere where) {
        DefaultMQPushConsumer c = userHook == null ? new DefaultMQPushConsumer(group)
            : new DefaultMQPushConsumer(group, userHook, new AllocateMessageQueueAveragely());
        configureClient(c);
        c.setConsumeFromWhere(where);
        return c;
    }

    private void startConsumer(DefaultMQPushConsumer c) throws Exception {
        c.start();
        shutdowns.add(c::shutdown);
    }

    private DefaultMQPushConsumer pushConsumer(String group, ConsumeFromWhere where, String expression, Collector sink,
                                               Consumer<DefaultMQPushConsumer> configure) throws Exception {
        DefaultMQPushConsumer c = baseConsumer(group, where);
        if (configure != null) {
            configure.accept(c);
        }
        c.subscribe(topic, expression);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(sink::add);
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        startConsumer(c);
        return c;
    }

    private Collector collector() {
        return new Collector();
    }

    /** Creates {@code name} with {@link #QUEUES} queues on every master and waits for its route. */
    private void createTopic(String name) throws Exception {
        DefaultMQAdminExt admin = admin();
        var cluster = admin.examineBrokerClusterInfo();
        int masters = 0;
        for (var broker : cluster.getBrokerAddrTable().values()) {
            String addr = broker.getBrokerAddrs().get(0L);
            if (addr != null) {
                admin.createAndUpdateTopicConfig(addr, new TopicConfig(name, QUEUES, QUEUES, PERM_READ_WRITE));
                masters++;
            }
        }
        check(masters > 0, "the name server knows a master broker");
        await(() -> {
            try {
                var route = admin.examineTopicRouteInfo(name);
                return route != null && !route.getQueueDatas().isEmpty();
            } catch (Exception e) {
                return false;
            }
        }, "route of the new topic " + name + " is published");
    }

    private SendResult sendOk(DefaultMQProducer producer, Message m) throws Exception {
        SendResult r = producer.send(m);
        check(r.getSendStatus() == SendStatus.SEND_OK, "send status " + r.getSendStatus());
        return r;
    }

    private Set<String> sendNumbered(DefaultMQProducer producer, String prefix, int count) throws Exception {
        Set<String> bodies = new HashSet<>();
        for (int i = 0; i < count; i++) {
            String body = prefix + i;
            sendOk(producer, new Message(topic, body.getBytes(StandardCharsets.UTF_8)));
            bodies.add(body);
        }
        return bodies;
    }

    /** The group's total lag, or -1 when the broker cannot say (the reason goes to lastStatsError). */
    private long totalDiff(DefaultMQAdminExt admin, String group) {
        try {
            long diff = admin.examineConsumeStats(group).computeTotalDiff();
            lastStatsError = "lag " + diff;
            return diff;
        } catch (Exception e) {
            lastStatsError = oneLine(e);
            return -1;
        }
    }

    private void awaitNoLag(DefaultMQAdminExt admin) throws InterruptedException {
        await(() -> totalDiff(admin, group) == 0, "committed offsets reach the end of every queue");
    }

    private void awaitBalanced(int consumers, TrackingAllocate... trackers) throws InterruptedException {
        await(() -> {
            Set<Integer> union = new HashSet<>();
            int total = 0;
            for (TrackingAllocate t : trackers) {
                if (t.lastCidCount() != consumers) {
                    return false;
                }
                union.addAll(t.queueIds());
                total += t.queueIds().size();
            }
            return union.size() == QUEUES && total == QUEUES;
        }, "rebalance gives the " + consumers + " consumer(s) all " + QUEUES + " queues without overlap");
    }

    /** Pulls every queue of {@code topicName} from offset 0 until {@code expected} messages are in. */
    private List<MessageExt> pullAll(String topicName, int expected) throws Exception {
        DefaultMQPullConsumer puller = pullConsumer("MxPull_" + suffix);
        List<MessageExt> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        String lastError = "";
        while (System.currentTimeMillis() < deadline) {
            out.clear();
            try {
                for (MessageQueue mq : puller.fetchSubscribeMessageQueues(topicName)) {
                    PullResult r = puller.pull(mq, "*", 0, 32);
                    if (r.getPullStatus() == PullStatus.FOUND) {
                        out.addAll(r.getMsgFoundList());
                    }
                }
                if (out.size() >= expected) {
                    checks++;
                    return out;
                }
                lastError = "found " + out.size();
            } catch (Exception e) {
                lastError = oneLine(e);
            }
            Thread.sleep(POLL_MS * 4);
        }
        throw new CheckFailed("pull " + expected + " messages from " + topicName + ": " + lastError);
    }

    private List<MessageExt> pollAtLeast(DefaultLitePullConsumer lite, int n) throws Exception {
        List<MessageExt> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (got.size() < n && System.currentTimeMillis() < deadline) {
            got.addAll(lite.poll(1_000));
        }
        check(got.size() >= n, "poll returned " + n + " messages, got " + got.size());
        return got;
    }

    /**
     * Shuts every client down, all at once: each client's shutdown (unregistering from the broker,
     * stopping its executors) takes about a second, and the verdict is already printed.
     */
    private void shutdownAll() {
        List<Thread> threads = new ArrayList<>();
        for (Runnable r : shutdowns) {
            Thread t = new Thread(() -> {
                try {
                    r.run();
                } catch (Throwable ignored) {
                    // already shut down (e.g. a consumer restarted by the scenario)
                }
            });
            t.setDaemon(true);
            t.start();
            threads.add(t);
        }
        long deadline = System.currentTimeMillis() + SHUTDOWN_WAIT_MS;
        for (Thread t : threads) {
            try {
                t.join(Math.max(1, deadline - System.currentTimeMillis()));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /**
     * Sets MessageModel.BROADCASTING. The enum moved from rocketmq-common (4.x) to
     * rocketmq-remoting (5.x); the setter's parameter type names the right one for either build.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void broadcastingModel(DefaultMQPushConsumer c) {
        try {
            for (java.lang.reflect.Method m : DefaultMQPushConsumer.class.getMethods()) {
                if (m.getName().equals("setMessageModel") && m.getParameterCount() == 1) {
                    Class type = m.getParameterTypes()[0];
                    m.invoke(c, Enum.valueOf(type, "BROADCASTING"));
                    return;
                }
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("setting BROADCASTING", e);
        }
        throw new IllegalStateException("DefaultMQPushConsumer has no setMessageModel");
    }

    private static String body(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    private static boolean notEmpty(String s) {
        return s != null && !s.isEmpty();
    }

    private static String oneLine(Throwable e) {
        String msg = e.getClass().getSimpleName() + ": " + e.getMessage();
        return msg.replace('\n', ' ').replace('\r', ' ');
    }

    /** A failed check: its message is the row's first failing assertion. */
    private static final class CheckFailed extends RuntimeException {
        CheckFailed(String message) {
            super(message);
        }
    }

    /** Everything a concurrently consuming listener received, with duplicates kept. */
    private final class Collector {
        private final ConcurrentLinkedQueue<MessageExt> all = new ConcurrentLinkedQueue<>();

        void add(MessageExt m) {
            all.add(m);
        }

        List<MessageExt> messages() {
            return new ArrayList<>(all);
        }

        int total() {
            return all.size();
        }

        Set<String> bodies() {
            Set<String> s = new HashSet<>();
            all.forEach(m -> s.add(body(m)));
            return s;
        }

        int uniqueCount() {
            return bodies().size();
        }

        Map<String, Integer> deliveryCounts() {
            Map<String, Integer> counts = new HashMap<>();
            all.forEach(m -> counts.merge(body(m), 1, Integer::sum));
            return counts;
        }

        void awaitUnique(int n, String what) throws InterruptedException {
            await(() -> uniqueCount() >= n, what + " (" + n + " messages)");
        }
    }

    /** AllocateMessageQueueAveragely that remembers its last answer, to see when a rebalance settled. */
    private static final class TrackingAllocate implements AllocateMessageQueueStrategy {
        private final AllocateMessageQueueAveragely inner = new AllocateMessageQueueAveragely();
        private volatile List<MessageQueue> last = List.of();
        private volatile int lastCids;

        @Override
        public List<MessageQueue> allocate(String group, String cid, List<MessageQueue> mqAll, List<String> cidAll) {
            List<MessageQueue> result = inner.allocate(group, cid, mqAll, cidAll);
            // Clustering consumers also rebalance their group's retry topic (one queue); only the
            // scenario topic's allocation says whether the rebalance settled.
            if (!mqAll.isEmpty() && !mqAll.get(0).getTopic().startsWith(RETRY_PREFIX)) {
                last = List.copyOf(result);
                lastCids = cidAll.size();
            }
            return result;
        }

        @Override
        public String getName() {
            return inner.getName();
        }

        List<MessageQueue> lastAllocation() {
            return last;
        }

        int lastCidCount() {
            return lastCids;
        }

        Set<Integer> queueIds() {
            Set<Integer> ids = new HashSet<>();
            last.forEach(mq -> ids.add(mq.getQueueId()));
            return ids;
        }
    }
}
