package dev.comet.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * Load from the official gRPC SDK (rocketmq-client-java), as an application would make it, for
 * bench/grpc_compare.sh. Plaintext. Prints one JSON object on stdout.
 *
 *     GrpcBench send host:port topic threads bodyBytes warmupSecs durationSecs
 *         threads share one Producer and send synchronously, one message per call; sends that
 *         complete during the warm-up are not counted. {"tps", "p50_ms", "p99_ms", "failed"}
 *     GrpcBench receive host:port topic group threads count maxSecs
 *         threads share one SimpleConsumer: receive up to 32 messages (30 s invisible), ack each,
 *         until `count` messages are acked or maxSecs pass. {"tps", "acked", "failed"}
 */
public final class GrpcBench {
    private static final Duration INVISIBLE = Duration.ofSeconds(30);
    private static final int RECEIVE_BATCH = 32;

    private GrpcBench() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String endpoint = args[1];
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration configuration = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10))
            .build();
        if ("send".equals(mode)) {
            send(provider, configuration, args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                Integer.parseInt(args[5]), Integer.parseInt(args[6]));
        } else {
            receive(provider, configuration, args[2], args[3], Integer.parseInt(args[4]),
                Long.parseLong(args[5]), Integer.parseInt(args[6]));
        }
        System.exit(0);
    }

    private static void send(ClientServiceProvider provider, ClientConfiguration configuration, String topic,
        int threads, int size, int warmupSecs, int durationSecs) throws Exception {
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        AtomicBoolean measuring = new AtomicBoolean(false);
        AtomicBoolean stop = new AtomicBoolean(false);
        AtomicLong failed = new AtomicLong();
        List<long[]> latencies = new ArrayList<>();
        List<int[]> counts = new ArrayList<>();
        try (Producer producer = provider.newProducerBuilder()
            .setClientConfiguration(configuration)
            .setTopics(topic)
            .build()) {
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long[] samples = new long[1 << 17];
                int[] count = new int[1];
                latencies.add(samples);
                counts.add(count);
                Thread worker = new Thread(() -> {
                    while (!stop.get()) {
                        Message message = provider.newMessageBuilder().setTopic(topic).setBody(body).build();
                        long begin = System.nanoTime();
                        try {
                            producer.send(message);
                        } catch (Exception e) {
                            failed.incrementAndGet();
                            continue;
                        }
                        if (measuring.get() && count[0] < samples.length) {
                            samples[count[0]++] = System.nanoTime() - begin;
                        }
                    }
                });
                workers.add(worker);
                worker.start();
            }
            Thread.sleep(warmupSecs * 1000L);
            failed.set(0);
            measuring.set(true);
            long begin = System.nanoTime();
            Thread.sleep(durationSecs * 1000L);
            measuring.set(false);
            double elapsed = (System.nanoTime() - begin) / 1e9;
            stop.set(true);
            for (Thread worker : workers) {
                worker.join();
            }
            int total = counts.stream().mapToInt(c -> c[0]).sum();
            long[] all = new long[total];
            int at = 0;
            for (int t = 0; t < threads; t++) {
                System.arraycopy(latencies.get(t), 0, all, at, counts.get(t)[0]);
                at += counts.get(t)[0];
            }
            Arrays.sort(all);
            System.out.printf("{\"tps\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"failed\":%d}%n", total / elapsed,
                percentile(all, 0.50), percentile(all, 0.99), failed.get());
        }
    }

    private static double percentile(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int index = (int) Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)));
        return sorted[index] / 1e6;
    }

    private static void receive(ClientServiceProvider provider, ClientConfiguration configuration, String topic,
        String group, int threads, long count, int maxSecs) throws Exception {
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        long deadline = System.nanoTime() + maxSecs * 1_000_000_000L;
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(configuration)
            .setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(java.util.Map.of(topic, FilterExpression.SUB_ALL))
            .build()) {
            long begin = System.nanoTime();
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                Thread worker = new Thread(() -> {
                    while (acked.get() < count && System.nanoTime() < deadline) {
                        List<MessageView> views;
                        try {
                            views = consumer.receive(RECEIVE_BATCH, INVISIBLE);
                        } catch (Exception e) {
                            continue;
                        }
                        for (MessageView view : views) {
                            try {
                                consumer.ack(view);
                                acked.incrementAndGet();
                            } catch (Exception e) {
                                failed.incrementAndGet();
                            }
                        }
                    }
                });
                workers.add(worker);
                worker.start();
            }
            for (Thread worker : workers) {
                worker.join();
            }
            double elapsed = (System.nanoTime() - begin) / 1e9;
            System.out.printf("{\"tps\":%.1f,\"acked\":%d,\"failed\":%d}%n", acked.get() / elapsed, acked.get(),
                failed.get());
        }
    }
}
