package dev.comet.interop.ha;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The client side of the replication interop test (interop/ha/run.sh), with the official Apache
 * RocketMQ 5.3.3 client and admin tools. One command per run; the exit code is 0 when every check
 * of the command held, 1 otherwise, and the last line printed says which.
 *
 * <pre>
 * create-topic  NAMESRV MASTER_ADDR TOPIC QUEUES TIMEOUT_S
 * produce       NAMESRV TOPIC COUNT SIZE TAG
 * wait-synced   MASTER_ADDR SLAVE_ADDR TOPIC QUEUES COUNT TIMEOUT_S
 * wait-topic    BROKER_ADDR TOPIC QUEUES TIMEOUT_S
 * consume       NAMESRV TOPIC GROUP COUNT SIZE TAG SLAVE_ADDR TIMEOUT_S
 * </pre>
 *
 * <p>Message i of a run has the body {@code TAG-<i, 7 digits>-} followed by filler bytes that
 * depend on i only, SIZE bytes in all, so the consumer checks every body it receives without a
 * manifest. Waits are condition polls bounded by the TIMEOUT_S argument.
 */
public final class HaCheck {
    private static final long POLL_MS = 200;
    private static final long RPC_TIMEOUT_MS = 3_000;
    private static final int SEND_TIMEOUT_MS = 10_000;
    private static final int PRODUCER_THREADS = 4;

    private HaCheck() {
    }

    public static void main(String[] args) {
        if (args.length == 0) {
            usage();
        }
        boolean ok;
        try {
            String[] rest = Arrays.copyOfRange(args, 1, args.length);
            switch (args[0]) {
                case "create-topic" -> ok = createTopic(rest);
                case "produce" -> ok = produce(rest);
                case "wait-synced" -> ok = waitSynced(rest);
                case "wait-topic" -> ok = waitTopic(rest);
                case "consume" -> ok = consume(rest);
                default -> {
                    usage();
                    ok = false;
                }
            }
        } catch (Exception e) {
            e.printStackTrace();
            say("FAIL " + args[0] + ": " + e);
            ok = false;
        }
        if (ok) {
            say("OK " + args[0]);
        }
        // The client's threads are not all daemons: leave without waiting for them.
        System.out.flush();
        Runtime.getRuntime().halt(ok ? 0 : 1);
    }

    private static void usage() {
        System.err.println("usage: HaCheck create-topic|produce|wait-synced|wait-topic|consume ARGS (see the class comment)");
        Runtime.getRuntime().halt(2);
    }

    private static void say(String line) {
        System.out.println("ha-java: " + line);
        System.out.flush();
    }

    private static void need(String[] args, int n, String names) {
        if (args.length != n) {
            throw new IllegalArgumentException("expected " + n + " arguments: " + names);
        }
    }

    private static DefaultMQAdminExt admin(String namesrv, String purpose) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(RPC_TIMEOUT_MS);
        admin.setInstanceName("ha-" + purpose + "-" + ProcessHandle.current().pid());
        if (namesrv != null) {
            admin.setNamesrvAddr(namesrv);
        }
        admin.start();
        return admin;
    }

    /** The body of message {@code index} of run {@code tag}, {@code size} bytes. */
    static byte[] body(String tag, int index, int size) {
        byte[] head = String.format("%s-%07d-", tag, index).getBytes(StandardCharsets.US_ASCII);
        byte[] out = new byte[Math.max(size, head.length)];
        System.arraycopy(head, 0, out, 0, head.length);
        long x = 0x9E3779B97F4A7C15L * (index + 1L);
        for (int i = head.length; i < out.length; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            out[i] = (byte) ('a' + (int) Long.remainderUnsigned(x, 26));
        }
        return out;
    }

    /** The index a body names, or -1 when it is not one of run {@code tag}'s bodies. */
    static int indexOf(String tag, byte[] body) {
        String prefix = tag + "-";
        int len = prefix.length() + 8;
        if (body.length < len) {
            return -1;
        }
        String head = new String(body, 0, len, StandardCharsets.US_ASCII);
        if (!head.startsWith(prefix) || head.charAt(len - 1) != '-') {
            return -1;
        }
        try {
            return Integer.parseInt(head.substring(prefix.length(), len - 1));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    // --- create-topic -------------------------------------------------------------------------

    private static boolean createTopic(String[] a) throws Exception {
        need(a, 5, "NAMESRV MASTER_ADDR TOPIC QUEUES TIMEOUT_S");
        String namesrv = a[0], master = a[1], topic = a[2];
        int queues = Integer.parseInt(a[3]);
        long deadline = System.currentTimeMillis() + Long.parseLong(a[4]) * 1000;
        DefaultMQAdminExt admin = admin(namesrv, "create");
        try {
            admin.createAndUpdateTopicConfig(master, new TopicConfig(topic, queues, queues, 6));
            // The master registers the new topic with the name server; wait until its route says so.
            while (true) {
                try {
                    TopicRouteData route = admin.examineTopicRouteInfo(topic);
                    for (BrokerData b : route.getBrokerDatas()) {
                        if (master.equals(b.getBrokerAddrs().get(0L))) {
                            say("topic " + topic + " (" + queues + " queues) on " + master + ", route " + describe(route));
                            return true;
                        }
                    }
                } catch (Exception e) {
                    // No route yet.
                }
                if (System.currentTimeMillis() > deadline) {
                    say("FAIL create-topic: the name server has no route of " + topic + " through " + master);
                    return false;
                }
                Thread.sleep(POLL_MS);
            }
        } finally {
            admin.shutdown();
        }
    }

    private static String describe(TopicRouteData route) {
        StringBuilder out = new StringBuilder();
        for (BrokerData b : route.getBrokerDatas()) {
            out.append(b.getBrokerName()).append(new TreeMap<>(b.getBrokerAddrs())).append(' ');
        }
        for (QueueData q : route.getQueueDatas()) {
            out.append(q.getBrokerName()).append(":r").append(q.getReadQueueNums()).append("/w")
                .append(q.getWriteQueueNums()).append("/perm").append(q.getPerm()).append(' ');
        }
        return out.toString().trim();
    }

    // --- produce ------------------------------------------------------------------------------

    private static boolean produce(String[] a) throws Exception {
        need(a, 5, "NAMESRV TOPIC COUNT SIZE TAG");
        String namesrv = a[0], topic = a[1], tag = a[4];
        int count = Integer.parseInt(a[2]), size = Integer.parseInt(a[3]);
        DefaultMQProducer producer = new DefaultMQProducer("HA_INTEROP_PRODUCER");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("ha-produce-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
        producer.setRetryTimesWhenSendFailed(2);
        producer.start();
        long t0 = System.nanoTime();
        Map<Integer, AtomicInteger> perQueue = new TreeMap<>();
        for (int q = 0; q < 64; q++) {
            perQueue.put(q, new AtomicInteger());
        }
        AtomicInteger next = new AtomicInteger();
        AtomicLong bytes = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(PRODUCER_THREADS);
        try {
            List<Future<String>> results = new ArrayList<>();
            for (int t = 0; t < PRODUCER_THREADS; t++) {
                results.add(pool.submit(() -> {
                    for (int i = next.getAndIncrement(); i < count; i = next.getAndIncrement()) {
                        byte[] b = body(tag, i, size);
                        SendResult r = producer.send(new Message(topic, "ha", b));
                        if (r.getSendStatus() != SendStatus.SEND_OK) {
                            return "message " + i + ": " + r.getSendStatus();
                        }
                        perQueue.get(r.getMessageQueue().getQueueId()).incrementAndGet();
                        bytes.addAndGet(b.length);
                    }
                    return null;
                }));
            }
            for (Future<String> f : results) {
                String failure = f.get();
                if (failure != null) {
                    say("FAIL produce: " + failure);
                    return false;
                }
            }
        } finally {
            pool.shutdownNow();
            producer.shutdown();
        }
        Map<Integer, Integer> used = new TreeMap<>();
        perQueue.forEach((q, n) -> {
            if (n.get() > 0) {
                used.put(q, n.get());
            }
        });
        say(String.format("produced %d messages (%d body bytes) in %.1f s, per queue %s",
            count, bytes.get(), (System.nanoTime() - t0) / 1e9, used));
        return true;
    }

    // --- wait-synced --------------------------------------------------------------------------

    private static long commitLogMax(DefaultMQAdminExt admin, String addr) throws Exception {
        KVTable kv = admin.fetchBrokerRuntimeStats(addr);
        return Long.parseLong(kv.getTable().get("commitLogMaxOffset"));
    }

    private static long[] queueMax(DefaultMQAdminExt admin, String addr, String topic, int queues) throws Exception {
        MQClientAPIImpl api = admin.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl();
        long[] out = new long[queues];
        for (int q = 0; q < queues; q++) {
            // GET_MAX_OFFSET at this very address: the broker answers from its own ConsumeQueue.
            out[q] = api.getMaxOffset(addr, new MessageQueue(topic, "", q), RPC_TIMEOUT_MS);
        }
        return out;
    }

    private static boolean waitSynced(String[] a) throws Exception {
        need(a, 6, "MASTER_ADDR SLAVE_ADDR TOPIC QUEUES COUNT TIMEOUT_S");
        String master = a[0], slave = a[1], topic = a[2];
        int queues = Integer.parseInt(a[3]);
        long count = Long.parseLong(a[4]);
        long t0 = System.currentTimeMillis();
        long deadline = t0 + Long.parseLong(a[5]) * 1000;
        DefaultMQAdminExt admin = admin(null, "sync");
        String last = "no answer yet";
        try {
            while (true) {
                try {
                    long mLog = commitLogMax(admin, master), sLog = commitLogMax(admin, slave);
                    long[] mq = queueMax(admin, master, topic, queues), sq = queueMax(admin, slave, topic, queues);
                    long total = Arrays.stream(mq).sum();
                    last = String.format("CommitLog end master %d slave %d; queue max offsets master %s slave %s",
                        mLog, sLog, Arrays.toString(mq), Arrays.toString(sq));
                    if (mLog == sLog && Arrays.equals(mq, sq) && total == count) {
                        say(String.format("slave %s caught up with master %s after %.1f s: %s", slave, master,
                            (System.currentTimeMillis() - t0) / 1e3, last));
                        // For the harness: where the CommitLog's written bytes end.
                        System.out.println("COMMITLOG_END " + mLog);
                        return true;
                    }
                } catch (Exception e) {
                    last = "query failed: " + e;
                }
                if (System.currentTimeMillis() > deadline) {
                    say("FAIL wait-synced: not caught up within " + a[5] + " s (expected " + count + " messages): " + last);
                    return false;
                }
                Thread.sleep(POLL_MS);
            }
        } finally {
            admin.shutdown();
        }
    }

    // --- wait-topic ---------------------------------------------------------------------------

    private static boolean waitTopic(String[] a) throws Exception {
        need(a, 4, "BROKER_ADDR TOPIC QUEUES TIMEOUT_S");
        String addr = a[0], topic = a[1];
        int queues = Integer.parseInt(a[2]);
        long t0 = System.currentTimeMillis();
        long deadline = t0 + Long.parseLong(a[3]) * 1000;
        DefaultMQAdminExt admin = admin(null, "topic");
        String last = "no answer yet";
        try {
            while (true) {
                try {
                    TopicConfig tc = admin.examineTopicConfig(addr, topic);
                    last = String.valueOf(tc);
                    if (tc != null && tc.getReadQueueNums() == queues && tc.getWriteQueueNums() == queues) {
                        say(String.format("%s holds topic %s after %.1f s: %s", addr, topic,
                            (System.currentTimeMillis() - t0) / 1e3, tc));
                        return true;
                    }
                } catch (Exception e) {
                    last = e.toString();
                }
                if (System.currentTimeMillis() > deadline) {
                    say("FAIL wait-topic: " + addr + " has no topic " + topic + " with " + queues + " queues within "
                        + a[3] + " s: " + last);
                    return false;
                }
                // A broker logs an error for each lookup of a topic it does not know: ask once a second.
                Thread.sleep(1_000);
            }
        } finally {
            admin.shutdown();
        }
    }

    // --- consume ------------------------------------------------------------------------------

    private static boolean consume(String[] a) throws Exception {
        need(a, 8, "NAMESRV TOPIC GROUP COUNT SIZE TAG SLAVE_ADDR TIMEOUT_S");
        String namesrv = a[0], topic = a[1], group = a[2], tag = a[5], slave = a[6];
        int count = Integer.parseInt(a[3]), size = Integer.parseInt(a[4]);
        long t0 = System.currentTimeMillis();
        long deadline = t0 + Long.parseLong(a[7]) * 1000;

        // The master is gone: the route must name the slave (brokerId 1) and no master, so every
        // message below can only have come from the slave.
        DefaultMQAdminExt admin = admin(namesrv, "route");
        try {
            String last = "no route";
            while (true) {
                try {
                    TopicRouteData route = admin.examineTopicRouteInfo(topic);
                    last = describe(route);
                    boolean slaveOnly = !route.getBrokerDatas().isEmpty() && !route.getQueueDatas().isEmpty();
                    for (BrokerData b : route.getBrokerDatas()) {
                        slaveOnly &= !b.getBrokerAddrs().containsKey(0L) && slave.equals(b.getBrokerAddrs().get(1L));
                    }
                    if (slaveOnly) {
                        say("route of " + topic + " without its master: " + last);
                        break;
                    }
                } catch (Exception e) {
                    last = e.toString();
                }
                if (System.currentTimeMillis() > deadline) {
                    say("FAIL consume: the route never named only the slave " + slave + ": " + last);
                    return false;
                }
                Thread.sleep(POLL_MS);
            }
        } finally {
            admin.shutdown();
        }

        BitSet seen = new BitSet(count);
        AtomicLong deliveries = new AtomicLong();
        AtomicLong duplicates = new AtomicLong();
        List<String> bad = new ArrayList<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("ha-consume-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.setHeartbeatBrokerInterval(1000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                deliveries.incrementAndGet();
                int i = indexOf(tag, m.getBody());
                synchronized (seen) {
                    if (i < 0 || i >= count || !Arrays.equals(m.getBody(), body(tag, i, size))) {
                        if (bad.size() < 10) {
                            bad.add(m.getMsgId() + " queue " + m.getQueueId() + " offset " + m.getQueueOffset());
                        }
                    } else if (seen.get(i)) {
                        duplicates.incrementAndGet();
                    } else {
                        seen.set(i);
                    }
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long nextReport = System.currentTimeMillis() + 5_000;
        int got;
        try {
            while (true) {
                synchronized (seen) {
                    got = seen.cardinality();
                }
                if (got == count || System.currentTimeMillis() > deadline) {
                    break;
                }
                if (System.currentTimeMillis() > nextReport) {
                    say("consumed " + got + " of " + count + " so far");
                    nextReport += 5_000;
                }
                Thread.sleep(POLL_MS);
            }
        } finally {
            consumer.shutdown();
        }
        double secs = (System.currentTimeMillis() - t0) / 1e3;
        synchronized (seen) {
            if (!bad.isEmpty()) {
                say("FAIL consume: bodies that are not this run's: " + bad);
                return false;
            }
            if (got != count) {
                List<Integer> missing = new ArrayList<>();
                for (int i = seen.nextClearBit(0); i < count && missing.size() < 20; i = seen.nextClearBit(i + 1)) {
                    missing.add(i);
                }
                say(String.format("FAIL consume: %d of %d bodies received within %s s (%d deliveries); first missing %s",
                    got, count, a[7], deliveries.get(), missing));
                return false;
            }
        }
        say(String.format("consumed all %d bodies from the slave %s in %.1f s (%d deliveries, %d duplicates)",
            count, slave, secs, deliveries.get(), duplicates.get()));
        return true;
    }
}
