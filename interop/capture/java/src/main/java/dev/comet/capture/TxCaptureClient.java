package dev.comet.capture;

import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Drives the real Apache RocketMQ Java client's TransactionMQProducer so that the recording proxy
 * captures the transaction commands: three half messages (SEND_MESSAGE_V2 with TRAN_MSG=true and
 * PGROUP), whose local transactions commit, roll back and answer UNKNOW; the three END_TRANSACTION
 * (37) that follow (commitOrRollback 8, 12 and 0); the broker's CHECK_TRANSACTION_STATE (39) for the
 * unknown one, which the check listener answers with COMMIT (END_TRANSACTION with
 * fromTransactionCheck=true). The broker must check quickly (transactionCheckInterval and
 * transactionTimeOut of a few seconds).
 *
 * <p>Then a pull consumer reads every queue of the topic until both committed messages are visible,
 * which proves the broker acted on the END_TRANSACTION frames, and that the rolled-back one is not.
 *
 * <p>Usage: {@code TxCaptureClient <namesrv host:port> <topic> <broker name>}. Compiles against
 * client 4.9.x and 5.x. Exits non-zero if any step fails.
 */
public final class TxCaptureClient {
    /** User property telling the local transaction which outcome to report. */
    static final String OUTCOME_PROPERTY = "cometTx";
    static final String COMMIT = "commit";
    static final String ROLLBACK = "rollback";
    static final String UNKNOWN = "unknown";
    static final String[] OUTCOMES = {COMMIT, ROLLBACK, UNKNOWN};
    static final long STEP_TIMEOUT_MS = 60_000;
    static final long RETRY_PAUSE_MS = 500;
    static final int PULL_MAX_NUMS = 32;

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: TxCaptureClient <namesrv> <topic> <brokerName>");
            System.exit(2);
        }
        // The client's own threads are not daemons: exit explicitly, or a failed step would hang.
        try {
            run(args);
        } catch (Throwable e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static void run(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];

        CountDownLatch checked = new CountDownLatch(1);
        AtomicInteger checks = new AtomicInteger();
        TransactionMQProducer producer = new TransactionMQProducer(topic + "_TXPG");
        producer.setNamesrvAddr(namesrv);
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout(10_000);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                switch (String.valueOf(msg.getUserProperty(OUTCOME_PROPERTY))) {
                    case COMMIT:
                        return LocalTransactionState.COMMIT_MESSAGE;
                    case ROLLBACK:
                        return LocalTransactionState.ROLLBACK_MESSAGE;
                    default:
                        return LocalTransactionState.UNKNOW;
                }
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                System.out.println("check #" + checks.incrementAndGet() + ": topic=" + msg.getTopic()
                    + " outcome=" + msg.getUserProperty(OUTCOME_PROPERTY) + " txId=" + msg.getTransactionId()
                    + " queueOffset=" + msg.getQueueOffset() + " commitLogOffset=" + msg.getCommitLogOffset());
                checked.countDown();
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        producer.start();

        for (String outcome : OUTCOMES) {
            Message m = new Message(topic, "TagTx", "TxKey-" + outcome,
                ("tx-" + outcome).getBytes(StandardCharsets.UTF_8));
            m.putUserProperty(OUTCOME_PROPERTY, outcome);
            TransactionSendResult r = CaptureClient.retry("half send " + outcome,
                () -> producer.sendMessageInTransaction(m, null));
            System.out.println(outcome + ": " + r + " local=" + r.getLocalTransactionState());
        }

        if (!checked.await(STEP_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("the broker never sent CHECK_TRANSACTION_STATE");
        }

        // Both committed messages (the direct commit and the checked one) must become visible.
        DefaultMQPullConsumer pull = new DefaultMQPullConsumer(topic + "_TXPULL");
        pull.setNamesrvAddr(namesrv);
        pull.setVipChannelEnabled(false);
        pull.start();
        Collection<MessageQueue> queues = CaptureClient.retry("queues", () -> pull.fetchSubscribeMessageQueues(topic));
        Map<MessageQueue, Long> offsets = new HashMap<>();
        Set<String> seen = new TreeSet<>();
        Set<String> expected = new TreeSet<>(Set.of("tx-" + COMMIT, "tx-" + UNKNOWN));
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (!seen.containsAll(expected)) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("committed messages seen: " + seen);
            }
            for (MessageQueue q : queues) {
                long from = offsets.getOrDefault(q, 0L);
                PullResult pr = CaptureClient.retry("pull", () -> pull.pull(q, "*", from, PULL_MAX_NUMS));
                if (pr.getPullStatus() == PullStatus.FOUND) {
                    for (MessageExt m : pr.getMsgFoundList()) {
                        String body = new String(m.getBody(), StandardCharsets.UTF_8);
                        System.out.println("  pulled " + q.getQueueId() + "/" + m.getQueueOffset() + " " + body
                            + " sysFlag=" + m.getSysFlag() + " props=" + m.getProperties());
                        seen.add(body);
                    }
                }
                offsets.put(q, pr.getNextBeginOffset());
            }
            if (!seen.containsAll(expected)) {
                Thread.sleep(RETRY_PAUSE_MS);
            }
        }
        if (seen.contains("tx-" + ROLLBACK)) {
            throw new IllegalStateException("the rolled-back message was delivered");
        }
        System.out.println("committed messages visible: " + seen + " after " + checks.get() + " check(s)");
        pull.shutdown();
        producer.shutdown();
        System.out.println("tx capture client done");
    }
}
