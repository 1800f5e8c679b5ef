package dev.comet.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Sends three transactional messages with the official gRPC SDK to a TRANSACTION topic: the
 * first is committed, the second rolled back, the third left open so that the server checks it
 * back; the checker commits it. Messages that must reach consumers have the usual shape of
 * {@link GrpcProducer} (tag "TagA", keys "key-i" and "k2-i", property "seq"=i, body
 * "grpc-body-i", i = 0 for the committed one and 1 for the checked one) and are printed as
 * "SENT i messageId"; the rolled-back one has body "grpc-rolled-back". Prints "CHECKED messageId"
 * when the check arrives and exits 0 once it was answered, 1 if no check came in time.
 *
 *     GrpcTxProducer host:port topic tls|plain checkWaitSeconds
 */
public final class GrpcTxProducer {
    private GrpcTxProducer() {
    }

    private static Message message(ClientServiceProvider provider, String topic, int i, String body) {
        return provider.newMessageBuilder()
            .setTopic(topic)
            .setTag("TagA")
            .setKeys("key-" + i, "k2-" + i)
            .addProperty("seq", Integer.toString(i))
            .setBody(body.getBytes(StandardCharsets.UTF_8))
            .build();
    }

    public static void main(String[] args) throws Exception {
        String endpoint = args[0];
        String topic = args[1];
        boolean tls = !"plain".equals(args[2]);
        long checkWait = Long.parseLong(args[3]);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration configuration = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(tls)
            .setRequestTimeout(Duration.ofSeconds(10))
            .build();
        CountDownLatch checked = new CountDownLatch(1);
        try (Producer producer = provider.newProducerBuilder()
            .setClientConfiguration(configuration)
            .setTopics(topic)
            .setTransactionChecker(view -> {
                System.out.println("CHECKED " + view.getMessageId());
                checked.countDown();
                return TransactionResolution.COMMIT;
            })
            .build()) {
            Transaction commit = producer.beginTransaction();
            SendReceipt committed = producer.send(message(provider, topic, 0, "grpc-body-0"), commit);
            commit.commit();
            System.out.println("SENT 0 " + committed.getMessageId());

            Transaction rollback = producer.beginTransaction();
            producer.send(message(provider, topic, 2, "grpc-rolled-back"), rollback);
            rollback.rollback();

            Transaction open = producer.beginTransaction();
            SendReceipt orphan = producer.send(message(provider, topic, 1, "grpc-body-1"), open);
            System.out.println("SENT 1 " + orphan.getMessageId());
            System.out.flush();
            boolean arrived = checked.await(checkWait, TimeUnit.SECONDS);
            // The checker's answer (EndTransaction) is sent after the checker returns.
            Thread.sleep(2000);
            System.exit(arrived ? 0 : 1);
        }
    }
}
