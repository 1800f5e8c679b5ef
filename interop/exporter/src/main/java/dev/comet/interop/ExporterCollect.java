package dev.comet.interop;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.body.BrokerStatsData;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.body.ProducerTableInfo;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * One collection cycle of apache/rocketmq-exporter's collector, made with the admin calls it makes
 * (rocketmq-tools' {@code DefaultMQAdminExt}), against a live cluster with a producer and a
 * consumer group online. Each figure the exporter turns into a gauge must be there and non-empty:
 * cluster and route, topic offsets ({@code rocketmq_producer_offset}), producers by group, the
 * groups consuming the topic with their connections and progress ({@code rocketmq_group_diff}),
 * the broker's runtime table parsed as the exporter parses it ({@code rocketmq_brokeruntime_*}),
 * and the minute statistics of topic puts, group gets and broker totals
 * ({@code rocketmq_producer_tps}, {@code rocketmq_consumer_tps}, {@code rocketmq_broker_tps}).
 * Prints one {@code OK} line per figure; exits 1 at the first one missing.
 *
 * <pre>java -cp ... dev.comet.interop.ExporterCollect NAMESRV TOPIC GROUP PRODUCER_GROUP</pre>
 */
public final class ExporterCollect {
    private static final int MESSAGES = 20;
    private static final long WAIT_MS = 60_000;

    private ExporterCollect() {
    }

    private static void fail(String what) {
        System.out.println("FAIL " + what);
        System.exit(1);
    }

    private static void ok(String what, Object value) {
        System.out.println("OK " + what + " = " + value);
    }

    /** Polls {@code check} every 500 ms until it returns a non-null value or the wait is over. */
    private static <T> T await(String what, Supplier<T> check) throws InterruptedException {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        Exception last = null;
        while (System.currentTimeMillis() < deadline) {
            try {
                T value = check.get();
                if (value != null) {
                    return value;
                }
            } catch (RuntimeException e) {
                last = e;
            }
            Thread.sleep(500);
        }
        fail(what + (last == null ? "" : " (" + last + ")"));
        return null;
    }

    /** The runtime keys the exporter reads with Long/Double/Integer.parse* (a missing one throws). */
    private static final String[] RUNTIME_NUMBERS = {
        "msgPutTotalTodayNow", "sendThreadPoolQueueHeadWaitTimeMills",
        "queryThreadPoolQueueHeadWaitTimeMills", "msgGetTotalTodayNow", "queryThreadPoolQueueSize",
        "bootTimestamp", "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning",
        "pullThreadPoolQueueSize", "commitLogMinOffset", "pullThreadPoolQueueHeadWaitTimeMills",
        "dispatchMaxBuffer", "brokerVersion", "consumeQueueDiskRatio", "pageCacheLockTimeMills",
        "commitLogDiskRatio", "commitLogMaxOffset", "getMessageEntireTimeMax",
        "msgPutTotalTodayMorning", "putMessageTimesTotal", "msgGetTotalTodayMorning",
        "sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp", "putMessageEntireTimeMax",
        "earliestMessageTimeStamp", "remainTransientStoreBufferNumbs",
        "queryThreadPoolQueueCapacity", "putMessageAverageSize", "dispatchBehindBytes",
        "putMessageSizeTotal", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity",
    };

    private static void checkRuntime(KVTable kv) {
        Map<String, String> t = kv.getTable();
        for (String key : RUNTIME_NUMBERS) {
            String v = t.get(key);
            try {
                Double.parseDouble(v);
            } catch (RuntimeException e) {
                fail("runtime " + key + " = " + v);
            }
        }
        Double.parseDouble(t.get("remainHowManyDataToFlush").split(" ")[0]);
        for (String tps : new String[] {"putTps", "getMissTps", "getTotalTps", "getFoundTps"}) {
            Double.parseDouble(t.get(tps).split(" ")[0]);
        }
        String transferred = t.containsKey("getTransferredTps") ? "getTransferredTps" : "getTransferedTps";
        Double.parseDouble(t.get(transferred).split(" ")[0]);
        // As the exporter reads it: "null" (Apache's broker before its first minute) is skipped,
        // and so is any entry that is not `label:count`.
        String distribution = t.get("putMessageDistributeTime");
        if (!"null".equalsIgnoreCase(distribution)) {
            for (String bucket : distribution.split(" ")) {
                String[] pair = bucket.split(":");
                if (pair.length >= 2) {
                    Integer.parseInt(pair[1]);
                }
            }
        }
        if (!t.get("commitLogDirCapacity").startsWith("Total : ")) {
            fail("runtime commitLogDirCapacity = " + t.get("commitLogDirCapacity"));
        }
        ok("brokerRuntime putTps", t.get("putTps"));
    }

    /** The minute statistic {@code name} of {@code key}, once its sum is positive. */
    private static BrokerStatsData stats(DefaultMQAdminExt admin, String broker, String name, String key)
        throws InterruptedException {
        BrokerStatsData data = await("viewBrokerStatsData " + name + " " + key, () -> {
            try {
                BrokerStatsData d = admin.viewBrokerStatsData(broker, name, key);
                return d.getStatsMinute().getSum() > 0 ? d : null;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        ok("stats " + name + " " + key, data.getStatsMinute().getSum() + " (tps " + data.getStatsMinute().getTps() + ")");
        return data;
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        String producerGroup = args[3];

        DefaultMQProducer producer = new DefaultMQProducer(producerGroup);
        producer.setNamesrvAddr(namesrv);
        producer.start();
        for (int i = 0; i < MESSAGES; i++) {
            producer.send(new Message(topic, ("exporter " + i).getBytes(StandardCharsets.UTF_8)));
        }
        CountDownLatch consumed = new CountDownLatch(MESSAGES);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.subscribe(topic, "*");
        consumer.setConsumeFromWhere(org.apache.rocketmq.common.consumer.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(m -> consumed.countDown());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        if (!consumed.await(WAIT_MS, TimeUnit.MILLISECONDS)) {
            fail("the consumer received the messages");
        }

        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("exporter-collect");
        admin.start();
        try {
            ClusterInfo cluster = admin.examineBrokerClusterInfo();
            String clusterName = cluster.getClusterAddrTable().keySet().iterator().next();
            String brokerName = cluster.getClusterAddrTable().get(clusterName).iterator().next();
            String master = cluster.getBrokerAddrTable().get(brokerName).getBrokerAddrs().get(MixAll.MASTER_ID);
            ok("cluster " + clusterName + " broker " + brokerName, master);
            if (!admin.fetchAllTopicList().getTopicList().contains(topic)) {
                fail("fetchAllTopicList lists " + topic);
            }
            if (admin.examineTopicRouteInfo(topic).getBrokerDatas().isEmpty()) {
                fail("examineTopicRouteInfo " + topic);
            }
            TopicStatsTable topicStats = admin.examineTopicStats(topic);
            long produced = topicStats.getOffsetTable().values().stream().mapToLong(o -> o.getMaxOffset()).sum();
            if (produced != MESSAGES) {
                fail("examineTopicStats max offsets sum to " + produced);
            }
            ok("producer_offset " + topic, produced);

            ProducerTableInfo producers = admin.getAllProducerInfo(master);
            if (producers.getData().get(producerGroup) == null || producers.getData().get(producerGroup).isEmpty()) {
                fail("getAllProducerInfo lists " + producerGroup + ": " + producers.getData().keySet());
            }
            ok("producers " + producerGroup, producers.getData().get(producerGroup).size());

            // A broker lists a group once the consumer's heartbeat or first commit reached it:
            // allow a few seconds for that.
            boolean listed = false;
            for (int attempt = 0; attempt < 20 && !listed; attempt++) {
                listed = admin.queryTopicConsumeByWho(topic).getGroupList().contains(group);
                if (!listed) {
                    Thread.sleep(500);
                }
            }
            if (!listed) {
                fail("queryTopicConsumeByWho " + topic + " lists " + group);
            }
            int connections = admin.examineConsumerConnectionInfo(group).getConnectionSet().size();
            if (connections == 0) {
                fail("examineConsumerConnectionInfo " + group);
            }
            ok("consumer connections " + group, connections);
            ConsumeStats progress = await("examineConsumeStats diff 0", () -> {
                try {
                    ConsumeStats s = admin.examineConsumeStats(group, topic);
                    return s.getOffsetTable().isEmpty() || s.computeTotalDiff() != 0 ? null : s;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            ok("group_diff " + group, progress.computeTotalDiff() + " over " + progress.getOffsetTable().size() + " queues");

            KVTable runtime = await("fetchBrokerRuntimeStats with a putTps over 10 s", () -> {
                try {
                    KVTable kv = admin.fetchBrokerRuntimeStats(master);
                    String tps = kv.getTable().get("putTps");
                    return tps != null && !tps.split(" ", -1)[0].isEmpty() ? kv : null;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            checkRuntime(runtime);

            stats(admin, master, "TOPIC_PUT_NUMS", topic);
            stats(admin, master, "TOPIC_PUT_SIZE", topic);
            stats(admin, master, "GROUP_GET_NUMS", topic + "@" + group);
            stats(admin, master, "GROUP_GET_SIZE", topic + "@" + group);
            stats(admin, master, "BROKER_PUT_NUMS", clusterName);
            stats(admin, master, "BROKER_GET_NUMS", clusterName);
        } finally {
            admin.shutdown();
            consumer.shutdown();
            producer.shutdown();
        }
        System.out.println("collected");
    }
}
