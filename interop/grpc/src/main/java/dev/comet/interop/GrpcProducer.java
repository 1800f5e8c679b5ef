package dev.comet.interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * Sends N messages with the official gRPC SDK to one endpoint, over TLS (the SDK's default; it
 * trusts any certificate) or plaintext:
 * message i has tag "TagA", keys "key-i" and "k2-i", property "seq"=i and body "grpc-body-i".
 * Prints one line per message, "SENT i messageId", and exits 0 once all were acknowledged.
 * With a delay, each message is a timer message ({@code setDeliveryTimestamp}) due that many
 * milliseconds after it is built, and its line ends with that time: "SENT i messageId dueMs".
 *
 * With GRPC_ACCESS_KEY and GRPC_SECRET_KEY set, requests are signed with that ACL account. With
 * GRPC_MESSAGE_GROUP set, every message carries that message group (a FIFO topic's messages).
 *
 *     GrpcProducer host:port topic count tls|plain [delayMs]
 */
public final class GrpcProducer {
    private GrpcProducer() {
    }

    public static void main(String[] args) throws Exception {
        String endpoint = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        boolean tls = !"plain".equals(args[3]);
        long delayMs = args.length > 4 ? Long.parseLong(args[4]) : 0;
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration configuration = Credentials.fromEnvironment(ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(tls)
            .setRequestTimeout(Duration.ofSeconds(10))).build();
        String messageGroup = System.getenv("GRPC_MESSAGE_GROUP");
        try (Producer producer = provider.newProducerBuilder()
            .setClientConfiguration(configuration)
            .setTopics(topic)
            .build()) {
            for (int i = 0; i < count; i++) {
                MessageBuilder builder = provider.newMessageBuilder()
                    .setTopic(topic)
                    .setTag("TagA")
                    .setKeys("key-" + i, "k2-" + i)
                    .addProperty("seq", Integer.toString(i))
                    .setBody(("grpc-body-" + i).getBytes(StandardCharsets.UTF_8));
                long due = System.currentTimeMillis() + delayMs;
                if (delayMs > 0) {
                    builder.setDeliveryTimestamp(due);
                }
                if (messageGroup != null && !messageGroup.isEmpty()) {
                    builder.setMessageGroup(messageGroup);
                }
                SendReceipt receipt = producer.send(builder.build());
                System.out.println("SENT " + i + " " + receipt.getMessageId() + (delayMs > 0 ? " " + due : ""));
            }
        }
        System.exit(0);
    }
}
