import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.consumer.store.RemoteBrokerOffsetStore;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.exception.RemotingException;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The push_clustering scenario's split, run with the official Java client against Apache RocketMQ:
 * owned sets that look settled while a member is still applying a rebalance computed before the other
 * member joined, and the record both members then consume.
 *
 * <pre>
 *   CP=$(interop/apache/run.sh classpath)          # Apache RocketMQ 5.3.3, its client and tools
 *   javac -d /tmp/rw -cp "$CP" interop/comet-client/java/RebalanceWindow.java
 *   java -cp "/tmp/rw:$CP" RebalanceWindow "$NAMESRV_ADDR" "$BROKER_ADDR"   # from interop/apache/run.sh start
 * </pre>
 *
 * For the 4.9.8 client, take the classpath of interop/java built with -Drocketmq.client.version=4.9.8.
 *
 * Consumer 0 starts alone; its first rebalance (over itself only) is held inside the start-offset read
 * of its third queue, so its table holds queues 0 and 1. Consumer 1 joins and takes queues 2 and 3:
 * both own queues, disjointly, all four together. Released, consumer 0's rebalance adds queues 2 and
 * 3 and pulls them; its next rebalance (over both members) is held inside the allocation while one
 * message is sent to queue 2. The last line reports how often the group received it (2: both members).
 */
public class RebalanceWindow {
    static final int QUEUES = 4;

    record Delivery(int who, int queue, long offset) {}

    static void log(String s) {
        System.out.println(System.currentTimeMillis() + " " + s);
    }

    static void await(String what, CountDownLatch latch) throws InterruptedException {
        if (!latch.await(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("never reached: " + what);
        }
        log(what);
    }

    /** One hold: the first caller waits in enter() until release. */
    static class Hold {
        final CountDownLatch entered = new CountDownLatch(1);
        final CountDownLatch released = new CountDownLatch(1);

        synchronized boolean take() {
            if (entered.getCount() == 0) {
                return false;
            }
            entered.countDown();
            return true;
        }

        void waitRelease() {
            try {
                released.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The broker offset store; the first read from the broker of queue 2 or 3 is held. */
    static class HeldOffsetRead implements OffsetStore {
        final DefaultMQPushConsumer owner;
        final String group;
        final Hold hold = new Hold();
        volatile OffsetStore broker;

        HeldOffsetRead(DefaultMQPushConsumer owner, String group) {
            this.owner = owner;
            this.group = group;
        }

        /** Created on first use: the consumer's client instance exists only once it starts. */
        OffsetStore broker() {
            if (broker == null) {
                synchronized (this) {
                    if (broker == null) {
                        broker = new RemoteBrokerOffsetStore(owner.getDefaultMQPushConsumerImpl().getmQClientFactory(), group);
                    }
                }
            }
            return broker;
        }

        public void load() {}
        public void updateOffset(MessageQueue mq, long offset, boolean increaseOnly) { broker().updateOffset(mq, offset, increaseOnly); }
        /** 5.x only (offset reset), not reached here; written without the 5.x call so 4.9.x compiles it too. */
        public void updateAndFreezeOffset(MessageQueue mq, long offset) { broker().updateOffset(mq, offset, false); }
        public void persistAll(Set<MessageQueue> mqs) { broker().persistAll(mqs); }
        public void persist(MessageQueue mq) { broker().persist(mq); }
        public void removeOffset(MessageQueue mq) { broker().removeOffset(mq); }
        public Map<MessageQueue, Long> cloneOffsetTable(String topic) { return broker().cloneOffsetTable(topic); }

        public void updateConsumeOffsetToBroker(MessageQueue mq, long offset, boolean oneway)
            throws RemotingException, MQBrokerException, InterruptedException, MQClientException {
            broker().updateConsumeOffsetToBroker(mq, offset, oneway);
        }

        public long readOffset(MessageQueue mq, ReadOffsetType type) {
            boolean mine = !mq.getTopic().startsWith("%RETRY%");
            if (type == ReadOffsetType.READ_FROM_STORE && mine && mq.getQueueId() >= 2 && hold.take()) {
                log("consumer 0: start-offset read of queue " + mq.getQueueId() + " held");
                hold.waitRelease();
            }
            long offset = broker().readOffset(mq, type);
            if (type == ReadOffsetType.READ_FROM_STORE && mine) {
                log("consumer 0: start offset of queue " + mq.getQueueId() + " read from the broker: " + offset);
            }
            return offset;
        }
    }

    /** AVG; the first allocation of the topic over two members is held. */
    static class HeldAllocation implements AllocateMessageQueueStrategy {
        final String topic;
        final Hold hold = new Hold();

        HeldAllocation(String topic) {
            this.topic = topic;
        }

        public List<MessageQueue> allocate(String group, String cid, List<MessageQueue> all, List<String> cids) {
            boolean mine = !all.isEmpty() && all.get(0).getTopic().equals(topic);
            if (mine) {
                log("consumer 0: allocation over members " + cids);
            }
            if (mine && cids.size() == 2 && hold.take()) {
                log("consumer 0: allocation over both members held");
                hold.waitRelease();
            }
            return new AllocateMessageQueueAveragely().allocate(group, cid, all, cids);
        }

        public String getName() {
            return "AVG";
        }
    }

    static DefaultMQPushConsumer consumer(String namesrv, String group, String instance, String topic, int who,
                                          Queue<Delivery> got) throws MQClientException {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instance);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                got.add(new Delivery(who, m.getQueueId(), m.getQueueOffset()));
                log("consumer " + who + " consumed queue " + m.getQueueId() + " offset " + m.getQueueOffset());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return c;
    }

    static Set<Integer> owned(DefaultMQPushConsumer c, String topic) {
        return c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet().stream()
            .filter(q -> q.getTopic().equals(topic))
            .map(MessageQueue::getQueueId)
            .collect(Collectors.toCollection(TreeSet::new));
    }

    /** The scenario's check: both own queues, disjointly, all of them together. */
    static boolean looksSettled(Set<Integer> a, Set<Integer> b) {
        Set<Integer> both = new HashSet<>(a);
        both.retainAll(b);
        return !a.isEmpty() && !b.isEmpty() && both.isEmpty() && a.size() + b.size() == QUEUES;
    }

    /**
     * Java's rebalance visits the queues of an allocation in the order of a HashSet of them; a topic
     * whose queues 0 and 1 come first makes the held read leave consumer 0 with exactly {0, 1}.
     */
    static String topicVisitingZeroAndOneFirst(String prefix) {
        for (int i = 0; ; i++) {
            String topic = prefix + "_" + i;
            Set<MessageQueue> set = new HashSet<>();
            for (int q = 0; q < QUEUES; q++) {
                set.add(new MessageQueue(topic, "broker-a", q));
            }
            List<Integer> order = new ArrayList<>();
            set.forEach(mq -> order.add(mq.getQueueId()));
            if (new HashSet<>(order.subList(0, 2)).equals(Set.of(0, 1))) {
                return topic;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], brokerAddr = args[1];
        String suffix = Long.toString(System.currentTimeMillis());
        String topic = topicVisitingZeroAndOneFirst("JavaRebalanceWindow_" + suffix);
        String group = "java_rebalance_window_" + suffix;
        List<Runnable> shutdowns = new ArrayList<>();
        int status = 1;
        try {
            DefaultMQAdminExt admin = new DefaultMQAdminExt();
            admin.setNamesrvAddr(namesrv);
            admin.setInstanceName("admin-" + suffix);
            admin.start();
            shutdowns.add(admin::shutdown);
            admin.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(topic, QUEUES, QUEUES, 6));
            long deadline = System.currentTimeMillis() + 60_000;
            while (admin.examineTopicRouteInfo(topic) == null) {
                Thread.sleep(100);
            }

            Queue<Delivery> got = new ConcurrentLinkedQueue<>();
            DefaultMQPushConsumer c0 = consumer(namesrv, group, "c0-" + suffix, topic, 0, got);
            HeldOffsetRead store = new HeldOffsetRead(c0, group);
            HeldAllocation allocation = new HeldAllocation(topic);
            c0.setOffsetStore(store);
            c0.setAllocateMessageQueueStrategy(allocation);
            c0.start();
            shutdowns.add(0, c0::shutdown);
            await("consumer 0's first rebalance is held", store.hold.entered);
            DefaultMQPushConsumer c1 = consumer(namesrv, group, "c1-" + suffix, topic, 1, got);
            c1.start();
            shutdowns.add(0, c1::shutdown);
            while (!looksSettled(owned(c0, topic), owned(c1, topic))) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("owned " + owned(c0, topic) + " " + owned(c1, topic));
                }
                Thread.sleep(20);
            }
            log("owned sets look settled: consumer 0 " + owned(c0, topic) + ", consumer 1 " + owned(c1, topic));
            store.hold.released.countDown();
            await("consumer 0's rebalance over both members is held", allocation.hold.entered);
            log("owned: consumer 0 " + owned(c0, topic) + ", consumer 1 " + owned(c1, topic));

            DefaultMQProducer producer = new DefaultMQProducer("java_rebalance_window_p_" + suffix);
            producer.setNamesrvAddr(namesrv);
            producer.setInstanceName("p-" + suffix);
            producer.start();
            shutdowns.add(0, producer::shutdown);
            SendResult sent = producer.send(new Message(topic, "cluster-0".getBytes()),
                (mqs, msg, arg) -> mqs.stream().filter(q -> q.getQueueId() == 2).findFirst().orElseThrow(), null);
            log("sent to queue " + sent.getMessageQueue().getQueueId() + " offset " + sent.getQueueOffset());
            while (got.stream().map(Delivery::who).distinct().count() < 2 && System.currentTimeMillis() < deadline) {
                Thread.sleep(20);
            }
            allocation.hold.released.countDown();
            long times = got.stream()
                .filter(d -> d.queue() == 2 && d.offset() == sent.getQueueOffset())
                .count();
            System.out.println("RESULT queue 2 offset " + sent.getQueueOffset() + " consumed " + times
                + " times by the group: " + got);
            status = 0;
        } catch (Exception e) {
            e.printStackTrace();
        } finally {
            shutdowns.forEach(Runnable::run);
            System.exit(status);
        }
    }
}
