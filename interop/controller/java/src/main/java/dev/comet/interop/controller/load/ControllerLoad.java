package dev.comet.interop.controller.load;

import java.io.BufferedWriter;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The client side of the controller-mode fault test (interop/controller/run.sh), with the official
 * Apache RocketMQ 5.3.3 client and admin tools. One command per run; exit code 0 when the command
 * did its job, 1 otherwise.
 *
 * <pre>
 * create-topic NAMESRV BROKER_NAME TOPIC QUEUES REPLICAS TIMEOUT_S
 *     waits until the name server lists REPLICAS brokers of BROKER_NAME (one of them brokerId 0),
 *     creates TOPIC with QUEUES queues on every one of them (so any of them can take writes after
 *     a failover without waiting for the slaves' metadata copy) and waits for its route
 * produce NAMESRV TOPIC ACK_FILE STOP_FILE RATE SIZE SEND_TIMEOUT_MS RETRIES POLL_NAMESRV_MS
 *     sync sends, one at a time, at most RATE per second, until STOP_FILE exists. Message n has the
 *     body "seq-n-" padded to SIZE bytes and the key n. Every send appends one line to ACK_FILE:
 *       ack SEQ TS_MS STORE_HOST BROKER_NAME QUEUE_ID QUEUE_OFFSET OFFSET_MSG_ID MSG_ID
 *       nok SEQ TS_MS STATUS STORE_HOST           (a result other than SEND_OK: not acknowledged)
 *       fail SEQ TS_MS EXCEPTION                  (the send threw after its retries)
 *     TS_MS is the wall clock when the result arrived; STORE_HOST is the address of the broker
 *     that stored it (decoded from the offset message id).
 * consume NAMESRV TOPIC GROUP OUT_FILE TIMEOUT_S
 *     a lite pull consumer of a new group reads every queue from offset 0 up to the max offsets the
 *     master reports when it starts, and writes one line per message to OUT_FILE:
 *       msg SEQ QUEUE_ID QUEUE_OFFSET STORE_HOST MSG_ID
 * </pre>
 */
public final class ControllerLoad {
    private static final long RPC_TIMEOUT_MS = 5_000;
    private static final long FAIL_PAUSE_MS = 10;

    private ControllerLoad() {
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
                case "consume" -> ok = consume(rest);
                default -> {
                    usage();
                    ok = false;
                }
            }
        } catch (Exception e) {
            e.printStackTrace();
            ok = false;
        }
        System.out.flush();
        // Client threads are not all daemons; leave explicitly.
        System.exit(ok ? 0 : 1);
    }

    private static void usage() {
        System.err.println("usage: ControllerLoad create-topic|produce|consume ... (see the class comment)");
        System.exit(2);
    }

    private static void say(String line) {
        System.out.println("controller-load: " + line);
        System.out.flush();
    }

    private static DefaultMQAdminExt admin(String namesrv, String purpose) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(RPC_TIMEOUT_MS);
        admin.setInstanceName("ctl-" + purpose + "-" + ProcessHandle.current().pid());
        admin.setNamesrvAddr(namesrv);
        admin.setVipChannelEnabled(false);
        admin.start();
        return admin;
    }

    // --- create-topic ------------------------------------------------------------------------

    private static boolean createTopic(String[] a) throws Exception {
        String namesrv = a[0], brokerName = a[1], topic = a[2];
        int queues = Integer.parseInt(a[3]), replicas = Integer.parseInt(a[4]);
        long deadline = System.currentTimeMillis() + Long.parseLong(a[5]) * 1000;
        DefaultMQAdminExt admin = admin(namesrv, "create");
        try {
            Map<Long, String> addrs = null;
            while (true) {
                try {
                    ClusterInfo info = admin.examineBrokerClusterInfo();
                    BrokerData bd = info.getBrokerAddrTable().get(brokerName);
                    if (bd != null && bd.getBrokerAddrs().size() >= replicas && bd.getBrokerAddrs().containsKey(0L)) {
                        addrs = new TreeMap<>(bd.getBrokerAddrs());
                        break;
                    }
                } catch (Exception e) {
                    // the name server may not know the broker yet
                }
                if (System.currentTimeMillis() > deadline) {
                    say("FAIL the name server never listed " + replicas + " brokers of " + brokerName + " with a master");
                    return false;
                }
                Thread.sleep(300);
            }
            for (Map.Entry<Long, String> e : addrs.entrySet()) {
                admin.createAndUpdateTopicConfig(e.getValue(), new TopicConfig(topic, queues, queues, 6));
                say("topic " + topic + " (" + queues + " queues) created on brokerId " + e.getKey() + " " + e.getValue());
            }
            while (true) {
                try {
                    TopicRouteData route = admin.examineTopicRouteInfo(topic);
                    boolean master = route.getBrokerDatas().stream().anyMatch(b -> b.getBrokerAddrs().containsKey(0L));
                    int writable = route.getQueueDatas().stream().mapToInt(QueueData::getWriteQueueNums).sum();
                    if (master && writable >= queues) {
                        say("OK route of " + topic + ": " + route.getBrokerDatas().get(0).getBrokerAddrs());
                        return true;
                    }
                } catch (Exception e) {
                    // not registered yet
                }
                if (System.currentTimeMillis() > deadline) {
                    say("FAIL no route with a master for " + topic);
                    return false;
                }
                Thread.sleep(300);
            }
        } finally {
            admin.shutdown();
        }
    }

    // --- produce -----------------------------------------------------------------------------

    private static String hostOf(String offsetMsgId) {
        try {
            SocketAddress sa = MessageDecoder.decodeMessageId(offsetMsgId).getAddress();
            if (sa instanceof InetSocketAddress isa) {
                return isa.getAddress().getHostAddress() + ":" + isa.getPort();
            }
            return String.valueOf(sa);
        } catch (Exception e) {
            return "?";
        }
    }

    static byte[] body(long seq, int size) {
        StringBuilder sb = new StringBuilder("seq-").append(seq).append('-');
        while (sb.length() < size) {
            sb.append((char) ('a' + (sb.length() + seq) % 26));
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static boolean produce(String[] a) throws Exception {
        String namesrv = a[0], topic = a[1];
        Path ackFile = Path.of(a[2]), stopFile = Path.of(a[3]);
        int rate = Integer.parseInt(a[4]), size = Integer.parseInt(a[5]);
        int sendTimeout = Integer.parseInt(a[6]), retries = Integer.parseInt(a[7]), poll = Integer.parseInt(a[8]);

        DefaultMQProducer producer = new DefaultMQProducer("ControllerLoadProducer");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("ctl-produce-" + ProcessHandle.current().pid());
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout(sendTimeout);
        producer.setRetryTimesWhenSendFailed(retries);
        producer.setPollNameServerInterval(poll);
        producer.setSendLatencyFaultEnable(false);
        producer.start();
        say("producing to " + topic + " at up to " + rate + "/s, sendMsgTimeout " + sendTimeout + " ms, retries " + retries
            + ", route refresh every " + poll + " ms");

        long sent = 0, acked = 0, nok = 0, failed = 0;
        long intervalNs = rate > 0 ? 1_000_000_000L / rate : 0;
        long next = System.nanoTime();
        long lastReport = System.currentTimeMillis();
        try (BufferedWriter out = Files.newBufferedWriter(ackFile, StandardCharsets.UTF_8)) {
            while (!Files.exists(stopFile)) {
                long seq = ++sent;
                Message msg = new Message(topic, "load", String.valueOf(seq), body(seq, size));
                String line;
                try {
                    SendResult r = producer.send(msg);
                    long ts = System.currentTimeMillis();
                    String host = hostOf(r.getOffsetMsgId());
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        acked++;
                        MessageQueue mq = r.getMessageQueue();
                        line = "ack " + seq + " " + ts + " " + host + " " + mq.getBrokerName() + " " + mq.getQueueId() + " "
                            + r.getQueueOffset() + " " + r.getOffsetMsgId() + " " + r.getMsgId();
                    } else {
                        nok++;
                        line = "nok " + seq + " " + ts + " " + r.getSendStatus() + " " + host;
                    }
                } catch (Exception e) {
                    failed++;
                    String what = e.getClass().getSimpleName();
                    String m = e.getMessage();
                    if (m != null) {
                        // the first words only, on one line
                        m = m.replaceAll("\\s+", " ");
                        what += ":" + (m.length() > 80 ? m.substring(0, 80) : m).replace(' ', '_');
                    }
                    line = "fail " + seq + " " + System.currentTimeMillis() + " " + what;
                    Thread.sleep(FAIL_PAUSE_MS);
                }
                out.write(line);
                out.newLine();
                out.flush();
                long now = System.currentTimeMillis();
                if (now - lastReport >= 10_000) {
                    say("sent " + sent + ", acked " + acked + ", not ok " + nok + ", failed " + failed);
                    lastReport = now;
                }
                if (intervalNs > 0) {
                    next += intervalNs;
                    long wait = next - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    } else if (wait < -1_000_000_000L) {
                        next = System.nanoTime(); // do not burst after a stall
                    }
                }
            }
        } finally {
            producer.shutdown();
        }
        say("DONE sent " + sent + ", acked " + acked + ", not ok " + nok + ", failed " + failed);
        return true;
    }

    // --- consume -----------------------------------------------------------------------------

    private static boolean consume(String[] a) throws Exception {
        String namesrv = a[0], topic = a[1], group = a[2];
        Path outFile = Path.of(a[3]);
        long deadline = System.currentTimeMillis() + Long.parseLong(a[4]) * 1000;

        Map<Integer, Long> target = new HashMap<>();
        DefaultMQAdminExt admin = admin(namesrv, "stats");
        try {
            TopicStatsTable stats = admin.examineTopicStats(topic);
            for (Map.Entry<MessageQueue, TopicOffset> e : stats.getOffsetTable().entrySet()) {
                target.merge(e.getKey().getQueueId(), e.getValue().getMaxOffset(), Math::max);
            }
        } finally {
            admin.shutdown();
        }
        long total = target.values().stream().mapToLong(Long::longValue).sum();
        say("reading " + total + " messages, max offsets per queue " + new TreeMap<>(target));

        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("ctl-consume-" + ProcessHandle.current().pid());
        consumer.setVipChannelEnabled(false);
        consumer.setAutoCommit(false);
        consumer.setPullBatchSize(64);
        consumer.setPollTimeoutMillis(1000);
        consumer.start();
        Map<Integer, Long> next = new HashMap<>();
        long read = 0;
        try (BufferedWriter out = Files.newBufferedWriter(outFile, StandardCharsets.UTF_8)) {
            Collection<MessageQueue> mqs = consumer.fetchMessageQueues(topic);
            List<MessageQueue> wanted = new ArrayList<>();
            for (MessageQueue mq : mqs) {
                if (target.getOrDefault(mq.getQueueId(), 0L) > 0) {
                    wanted.add(mq);
                }
                next.put(mq.getQueueId(), 0L);
            }
            consumer.assign(wanted);
            for (MessageQueue mq : wanted) {
                // A broker that just changed role may drop the first connection: retry a few times.
                for (int attempt = 1; ; attempt++) {
                    try {
                        consumer.seek(mq, 0);
                        break;
                    } catch (Exception e) {
                        if (attempt >= 10) {
                            throw e;
                        }
                        say("seek " + mq + " failed (" + e.getMessage() + "), retrying");
                        Thread.sleep(1000);
                    }
                }
            }
            while (!done(next, target)) {
                if (System.currentTimeMillis() > deadline) {
                    say("FAIL read " + read + " of " + total + " before the timeout; next offsets " + new TreeMap<>(next));
                    return false;
                }
                for (MessageExt m : consumer.poll()) {
                    String body = new String(m.getBody(), StandardCharsets.UTF_8);
                    String seq = "?";
                    if (body.startsWith("seq-")) {
                        int end = body.indexOf('-', 4);
                        seq = end > 0 ? body.substring(4, end) : "?";
                    }
                    String host = m.getStoreHost() instanceof InetSocketAddress isa
                        ? isa.getAddress().getHostAddress() + ":" + isa.getPort() : String.valueOf(m.getStoreHost());
                    out.write("msg " + seq + " " + m.getQueueId() + " " + m.getQueueOffset() + " " + host + " " + m.getMsgId());
                    out.newLine();
                    read++;
                    next.merge(m.getQueueId(), m.getQueueOffset() + 1, Math::max);
                }
            }
        } finally {
            consumer.shutdown();
        }
        say("OK read " + read + " messages (" + total + " expected from the max offsets)");
        return true;
    }

    private static boolean done(Map<Integer, Long> next, Map<Integer, Long> target) {
        for (Map.Entry<Integer, Long> e : target.entrySet()) {
            if (next.getOrDefault(e.getKey(), 0L) < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
