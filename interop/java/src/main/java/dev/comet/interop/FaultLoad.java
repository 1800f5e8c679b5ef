package dev.comet.interop;

import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Load of the network-namespace fault suite (crates/reliability/netns/run.sh) from the Apache
 * RocketMQ Java client: the same ledger and delivery line formats as
 * {@code comet-reliability fault produce|consume} (crates/reliability/src/fault_load.rs), the same
 * message ids and bodies, so the suite's checker audits both clients' messages alike.
 *
 * <p>Usage: {@code FaultLoad produce <namesrv> <topic> <ledger> <round> <tasks> <routeRefreshMs>} or
 * {@code FaultLoad consume <namesrv> <topic> <group> <deliveries> <routeRefreshMs>}. Both run until
 * SIGTERM, then finish what is in flight, shut the client down and exit.
 */
public final class FaultLoad {
    private static final String PREFIX = "comet-rel-";
    private static final int FILLER_SPREAD = 257;
    private static final int ROUND_SHIFT = 40;
    private static final int TASK_SHIFT = 32;

    private FaultLoad() {}

    /** The body of message {@code id}, byte for byte as {@code body_for} in body.rs. */
    static byte[] bodyFor(long id) {
        int fillerLen = (int) Long.remainderUnsigned(id * 31, FILLER_SPREAD);
        byte fill = (byte) ('a' + (int) Long.remainderUnsigned(id, 26));
        byte[] head = (PREFIX + String.format("%016x", id) + "-").getBytes(StandardCharsets.US_ASCII);
        byte[] out = Arrays.copyOf(head, head.length + fillerLen);
        Arrays.fill(out, head.length, out.length, fill);
        return out;
    }

    /** The id of an intact body, or null. */
    static Long intactId(byte[] body) {
        byte[] prefix = PREFIX.getBytes(StandardCharsets.US_ASCII);
        if (body.length < prefix.length + 16) {
            return null;
        }
        String hex = new String(body, prefix.length, 16, StandardCharsets.US_ASCII);
        long id;
        try {
            id = Long.parseUnsignedLong(hex, 16);
        } catch (NumberFormatException e) {
            return null;
        }
        return Arrays.equals(bodyFor(id), body) ? id : null;
    }

    static long fnv1a(byte[] body) {
        long h = 0xcbf29ce484222325L;
        for (byte b : body) {
            h ^= (b & 0xff);
            h *= 0x100000001b3L;
        }
        return h;
    }

    /** Appends whole lines, flushed; a failed write ends the process (the record would be incomplete). */
    static final class Lines {
        private final BufferedWriter out;

        Lines(String path) throws IOException {
            out = new BufferedWriter(new FileWriter(path, StandardCharsets.UTF_8, true));
        }

        synchronized void write(String text) {
            try {
                out.write(text);
                out.flush();
            } catch (IOException e) {
                System.err.println("cannot write " + e);
                Runtime.getRuntime().halt(2);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 7 && args[0].equals("produce")) {
            produce(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                Integer.parseInt(args[6]));
        } else if (args.length == 6 && args[0].equals("consume")) {
            consume(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]));
        } else {
            System.err.println("usage: FaultLoad produce <namesrv> <topic> <ledger> <round> <tasks> <routeRefreshMs>"
                + " | consume <namesrv> <topic> <group> <deliveries> <routeRefreshMs>");
            System.exit(2);
        }
    }

    static void produce(String namesrv, String topic, String ledger, int round, int tasks, int refreshMs)
        throws Exception {
        Lines out = new Lines(ledger);
        out.write("P " + round + " " + tasks + "\n");
        DefaultMQProducer producer = new DefaultMQProducer("fault_producer_java");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("fault-java-producer-" + round);
        producer.setPollNameServerInterval(refreshMs);
        producer.start();
        AtomicBoolean stop = new AtomicBoolean(false);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < tasks; t++) {
            final long base = ((long) round << ROUND_SHIFT) | ((long) t << TASK_SHIFT);
            Thread thread = new Thread(() -> {
                for (long seq = 0; !stop.get(); seq++) {
                    long id = base | seq;
                    String line;
                    try {
                        SendResult r = producer.send(new Message(topic, bodyFor(id)));
                        line = "A " + id + " " + r.getSendStatus() + " " + r.getMessageQueue().getBrokerName() + " "
                            + r.getMessageQueue().getQueueId() + " " + r.getQueueOffset() + " "
                            + System.currentTimeMillis() + "\n";
                    } catch (Exception e) {
                        line = "F " + id + " " + System.currentTimeMillis() + " "
                            + String.valueOf(e).replace('\n', ' ').replace('\r', ' ') + "\n";
                    }
                    out.write(line);
                }
            }, "fault-task-" + t);
            thread.start();
            threads.add(thread);
        }
        awaitTermination(() -> {
            stop.set(true);
            for (Thread thread : threads) {
                try {
                    thread.join();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            producer.shutdown();
        });
    }

    static void consume(String namesrv, String topic, String group, String deliveries, int refreshMs)
        throws Exception {
        Lines out = new Lines(deliveries);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("fault-java-consumer");
        consumer.setPollNameServerInterval(refreshMs);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        // As the suite's Rust consumer: each member holds queues of both groups.
        consumer.setAllocateMessageQueueStrategy(new AllocateMessageQueueAveragelyByCircle());
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            StringBuilder text = new StringBuilder();
            String broker = ctx.getMessageQueue().getBrokerName();
            for (MessageExt m : msgs) {
                Long id = intactId(m.getBody());
                text.append("D ").append(System.currentTimeMillis()).append(' ').append(broker).append(' ')
                    .append(m.getQueueId()).append(' ').append(m.getQueueOffset()).append(' ')
                    .append(id == null ? "-" : Long.toUnsignedString(id)).append(' ')
                    .append(String.format("%016x", fnv1a(m.getBody()))).append('\n');
            }
            out.write(text.toString());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        awaitTermination(consumer::shutdown);
    }

    /** Blocks until SIGTERM or SIGINT; the JVM runs {@code onStop} before it exits. */
    static void awaitTermination(Runnable onStop) throws InterruptedException {
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            onStop.run();
            stopped.countDown();
        }));
        stopped.await();
    }
}
