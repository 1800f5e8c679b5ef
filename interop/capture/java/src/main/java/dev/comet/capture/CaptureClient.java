package dev.comet.capture;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Drives the real Apache RocketMQ Java client through the commands Comet must speak, so that a
 * recording proxy in front of the name server and broker can capture the exact bytes: route lookups,
 * heartbeats, SEND_MESSAGE_V2 with tags/keys/user property, a batch of 3, a compressed 8 KiB body,
 * pulls, and consumer offset update/query. Every send goes to queue 0 so that a pull of queue 0 from
 * offset 0 returns all five stored records.
 *
 * <p>Usage: {@code CaptureClient <namesrv host:port> <topic> <broker name>}. The same source compiles
 * against client 4.9.x and 5.x. Exits non-zero if any step fails.
 */
public final class CaptureClient {
    static final int EXPECTED_RECORDS = 5;
    static final int BIG_BODY_LEN = 8192;
    static final long STEP_TIMEOUT_MS = 60_000;
    static final long RETRY_PAUSE_MS = 500;
    static final int PULL_MAX_NUMS = 32;

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: CaptureClient <namesrv> <topic> <brokerName>");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        String brokerName = args[2];
        MessageQueue queue0 = new MessageQueue(topic, brokerName, 0);

        DefaultMQProducer producer = new DefaultMQProducer(topic + "_PG");
        producer.setNamesrvAddr(namesrv);
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout(10_000);
        producer.start();

        Message single = new Message(topic, "TagA", "KeyA KeyB", "hello comet golden".getBytes(StandardCharsets.UTF_8));
        single.putUserProperty("cometProp", "golden");
        SendResult r1 = retry("single send", () -> producer.send(single, queue0));
        System.out.println("single: " + r1);

        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            batch.add(new Message(topic, "TagB", "BatchKey" + i, ("batch-" + i).getBytes(StandardCharsets.UTF_8)));
        }
        SendResult r2 = retry("batch send", () -> producer.send(batch, queue0));
        System.out.println("batch: " + r2);

        StringBuilder big = new StringBuilder();
        while (big.length() < BIG_BODY_LEN) {
            big.append("comet-golden-compressible-body-");
        }
        big.setLength(BIG_BODY_LEN);
        Message compressed = new Message(topic, "TagC", "BigKey", big.toString().getBytes(StandardCharsets.UTF_8));
        SendResult r3 = retry("compressed send", () -> producer.send(compressed, queue0));
        System.out.println("compressed: " + r3);

        // Pull queue 0 from offset 0 until all five records have come back.
        DefaultMQPullConsumer pull = new DefaultMQPullConsumer(topic + "_PULL");
        pull.setNamesrvAddr(namesrv);
        pull.setVipChannelEnabled(false);
        pull.start();
        long offset = 0;
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (offset < EXPECTED_RECORDS) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("pull: only reached offset " + offset);
            }
            final long from = offset;
            PullResult pr = retry("pull", () -> pull.pullBlockIfNotFound(queue0, "*", from, PULL_MAX_NUMS));
            System.out.println("pull from " + from + ": " + pr.getPullStatus() + " next=" + pr.getNextBeginOffset());
            if (pr.getPullStatus() == PullStatus.FOUND) {
                for (MessageExt m : pr.getMsgFoundList()) {
                    System.out.println("  pulled " + m.getQueueOffset() + " tags=" + m.getTags() + " keys=" + m.getKeys()
                        + " bodyLen=" + m.getBody().length);
                }
            }
            offset = pr.getNextBeginOffset();
        }
        pull.updateConsumeOffset(queue0, offset);
        // A synchronous (non-oneway) UPDATE_CONSUMER_OFFSET, so that its response is captured as well.
        pull.getDefaultMQPullConsumerImpl().getOffsetStore().updateConsumeOffsetToBroker(queue0, offset, false);
        long stored = pull.fetchConsumeOffset(queue0, true);
        System.out.println("offset update " + offset + ", query -> " + stored);
        if (stored != offset) {
            throw new IllegalStateException("queried offset " + stored + " != committed " + offset);
        }

        // A push consumer: heartbeat with a subscription, consumer list, offset queries, long-poll pulls.
        CountDownLatch consumed = new CountDownLatch(EXPECTED_RECORDS);
        AtomicInteger seen = new AtomicInteger();
        DefaultMQPushConsumer push = new DefaultMQPushConsumer(topic + "_PUSH");
        push.setNamesrvAddr(namesrv);
        push.setVipChannelEnabled(false);
        push.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        push.subscribe(topic, "*");
        push.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                seen.incrementAndGet();
                consumed.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        push.start();
        if (!consumed.await(STEP_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("push consumer saw only " + seen.get() + " messages");
        }
        System.out.println("push consumed " + seen.get());

        // Shutdown persists the push consumer's offsets (oneway UPDATE_CONSUMER_OFFSET) and unregisters.
        push.shutdown();
        pull.shutdown();
        producer.shutdown();
        System.out.println("capture client done");
    }

    interface Step<T> {
        T run() throws Exception;
    }

    /** Retries a step while the freshly auto-created topic propagates to the name server. */
    static <T> T retry(String what, Step<T> step) throws Exception {
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (true) {
            try {
                return step.run();
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                System.out.println(what + " failed, retrying: " + e);
                Thread.sleep(RETRY_PAUSE_MS);
            }
        }
    }
}
