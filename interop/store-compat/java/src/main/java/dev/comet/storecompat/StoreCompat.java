package dev.comet.storecompat;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;

import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageBatch;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Java half of the store-compatibility test between Apache RocketMQ and Comet.
 *
 * <ul>
 *   <li>{@code produce <namesrv> <brokerName> <manifest> <count> <seed>}: fills an Apache broker's
 *       store (3 topics x 4 queues, tags, keys, user properties, compressed bodies, batches, one
 *       delay-level message, both WAIT values) and writes a JSON-lines manifest of what the send
 *       results said: queue, queue offset, offset message id, UNIQ_KEY, body SHA-256, properties.
 *       It waits until the delayed message has been delivered to its real topic, so a store copied
 *       afterwards holds both its SCHEDULE_TOPIC_XXXX record and the delivered one.</li>
 *   <li>{@code consume <namesrv> <brokerName> <manifest>}: reads a store written by Comet through an
 *       Apache broker. Every queue named in Comet's manifest is pulled from offset 0 to its max and
 *       each message is compared field by field with the manifest (queue offset, commit-log offset,
 *       offset message id, UNIQ_KEY, body, flag, tags, keys, every property); then a sample is looked
 *       up through Apache's index (query by key, by UNIQ_KEY) and by offset message id.</li>
 * </ul>
 *
 * Prints one summary line and exits 1 on the first failed step or if any comparison failed.
 */
public final class StoreCompat {
    static final String[] TOPICS = {"CometStoreCompatA0", "CometStoreCompatA1", "CometStoreCompatA2"};
    static final String[] TAGS = {"TagA", "TagB", "TagC"};
    static final int QUEUES_PER_TOPIC = 4;
    static final String KEY_TOPIC = "TBW102";
    static final int MIN_BODY_LEN = 200;
    static final int MAX_BODY_LEN = 3000;
    /** Every this many messages, one compressible body above the 4 KiB compression threshold. */
    static final int COMPRESSED_EVERY = 97;
    static final int COMPRESSED_BODY_LEN = 6000;
    static final int COMPRESS_THRESHOLD = 4096;
    /** MessageSysFlag COMPRESSED (0x1) and the compression type bits (0x700). */
    static final int COMPRESSION_BITS = 0x701;
    static final int BATCH_EVERY = 101;
    static final int BATCH_LEN = 4;
    static final int WAIT_FALSE_EVERY = 5;
    static final int SHARED_KEYS = 7;
    static final int DELAY_LEVEL = 1;
    static final long DELAY_LEVEL_MILLIS = 1000;
    static final String SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX";
    static final long SEND_TIMEOUT_MS = 10_000;
    static final long STEP_TIMEOUT_MS = 60_000;
    static final long RETRY_PAUSE_MS = 300;
    static final int PULL_BATCH = 32;
    /** Every this many manifest entries, look the message up through Apache's index and by id. */
    static final int QUERY_SAMPLE_EVERY = 20;
    static final int QUERY_MAX_NUM = 64;

    private StoreCompat() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 1 && args[0].equals("produce") && args.length == 6) {
            produce(args[1], args[2], Paths.get(args[3]), Integer.parseInt(args[4]), Long.parseLong(args[5]));
        } else if (args.length >= 1 && args[0].equals("consume") && args.length == 4) {
            int failures = consume(args[1], args[2], Paths.get(args[3]));
            System.exit(failures == 0 ? 0 : 1);
        } else {
            System.err.println("usage: StoreCompat produce <namesrv> <brokerName> <manifest> <count> <seed>");
            System.err.println("       StoreCompat consume <namesrv> <brokerName> <manifest>");
            System.exit(2);
        }
        System.exit(0);
    }

    interface Step<T> {
        T run() throws Exception;
    }

    /** Retries a step that can fail while routes propagate (topic creation), up to a deadline. */
    static <T> T retry(String what, Step<T> step) throws Exception {
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (true) {
            try {
                return step.run();
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(what + " kept failing", e);
                }
                Thread.sleep(RETRY_PAUSE_MS);
            }
        }
    }

    static String sha256(byte[] body) throws NoSuchAlgorithmException {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(body));
    }

    static byte[] body(int i, Random rng) {
        if (i % COMPRESSED_EVERY == COMPRESSED_EVERY - 1) {
            StringBuilder text = new StringBuilder();
            while (text.length() < COMPRESSED_BODY_LEN) {
                text.append("apache-store-compat compressible line ").append(i).append(' ');
            }
            text.setLength(COMPRESSED_BODY_LEN);
            return text.toString().getBytes(StandardCharsets.UTF_8);
        }
        byte[] b = new byte[MIN_BODY_LEN + rng.nextInt(MAX_BODY_LEN - MIN_BODY_LEN + 1)];
        rng.nextBytes(b);
        return b;
    }

    static Message message(String topic, int i, byte[] body, boolean wait) {
        Message m = new Message(topic, TAGS[(i / 12) % TAGS.length], "ak-" + i + " ashared-" + (i % SHARED_KEYS),
            i % 5, body, wait);
        m.putUserProperty("cometIdx", Integer.toString(i));
        m.putUserProperty("cometNote", "grüße-" + i + "-✓");
        return m;
    }

    static JSONObject entry(String kind, Message m, String topic, int queueId, long queueOffset, String offsetMsgId,
                            String uniqKey, boolean batch) throws NoSuchAlgorithmException {
        JSONObject o = new JSONObject(true);
        o.put("kind", kind);
        o.put("topic", topic);
        o.put("queueId", queueId);
        o.put("queueOffset", queueOffset);
        o.put("offsetMsgId", offsetMsgId);
        o.put("uniqKey", uniqKey);
        o.put("bodySha256", sha256(m.getBody()));
        o.put("bodyLen", m.getBody().length);
        o.put("tags", m.getTags());
        o.put("keys", m.getKeys());
        o.put("flag", m.getFlag());
        o.put("batch", batch);
        o.put("compressed", !batch && m.getBody().length >= COMPRESS_THRESHOLD);
        o.put("properties", new JSONObject(new TreeMap<String, Object>(m.getProperties())));
        return o;
    }

    static void produce(String namesrv, String brokerName, Path manifest, int count, long seed) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("CometStoreCompatPG");
        producer.setNamesrvAddr(namesrv);
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout((int) SEND_TIMEOUT_MS);
        producer.start();
        DefaultMQPullConsumer pull = new DefaultMQPullConsumer("CometStoreCompatDelayWatch");
        pull.setNamesrvAddr(namesrv);
        pull.setVipChannelEnabled(false);
        pull.start();
        try (BufferedWriter out = Files.newBufferedWriter(manifest, StandardCharsets.UTF_8)) {
            for (String topic : TOPICS) {
                retry("create " + topic, () -> {
                    producer.createTopic(KEY_TOPIC, topic, QUEUES_PER_TOPIC, null);
                    return null;
                });
            }
            Random rng = new Random(seed);
            Map<MessageQueue, Long> nextOffset = new HashMap<>();
            int sent = 0;
            int batches = 0;
            int i = 0;
            boolean first = true;
            while (i < count) {
                String topic = TOPICS[i % TOPICS.length];
                MessageQueue mq = new MessageQueue(topic, brokerName, (i / TOPICS.length) % QUEUES_PER_TOPIC);
                if (i % BATCH_EVERY == BATCH_EVERY - 1 && i + BATCH_LEN <= count) {
                    List<Message> batch = new ArrayList<>();
                    for (int j = 0; j < BATCH_LEN; j++) {
                        byte[] b = body(i + j, rng);
                        batch.add(message(topic, i + j, java.util.Arrays.copyOf(b, Math.min(b.length, MAX_BODY_LEN)), true));
                    }
                    // What DefaultMQProducer.send(Collection) does, done here so the batch's own
                    // UNIQ_KEY is known: Apache 5.3.3 appends the batch-level properties (UNIQ_KEY,
                    // WAIT, CLUSTER, ...) after each member's, and readers take the last UNIQ_KEY.
                    MessageBatch mb = MessageBatch.generateFromList(batch);
                    for (Message m : mb) {
                        MessageClientIDSetter.setUniqID(m);
                    }
                    MessageClientIDSetter.setUniqID(mb);
                    mb.setBody(mb.encode());
                    SendResult r = producer.send(mb, mq, SEND_TIMEOUT_MS);
                    checkSent(r, "batch at " + i);
                    String batchUniq = MessageClientIDSetter.getUniqID(mb);
                    String[] uniq = r.getMsgId().split(",");
                    String[] offsetIds = r.getOffsetMsgId().split(",");
                    if (uniq.length != BATCH_LEN || offsetIds.length != BATCH_LEN) {
                        throw new IllegalStateException("batch result ids do not match its size: " + r);
                    }
                    for (int j = 0; j < BATCH_LEN; j++) {
                        Message m = batch.get(j);
                        JSONObject e = entry("msg", m, topic, mq.getQueueId(), r.getQueueOffset() + j, offsetIds[j],
                            uniq[j], true);
                        e.put("storedUniqKey", batchUniq);
                        e.getJSONObject("properties").put("UNIQ_KEY", batchUniq);
                        write(out, e);
                    }
                    nextOffset.put(mq, r.getQueueOffset() + BATCH_LEN);
                    sent += BATCH_LEN;
                    batches++;
                    i += BATCH_LEN;
                    continue;
                }
                Message m = message(topic, i, body(i, rng), i % WAIT_FALSE_EVERY != 0);
                SendResult r = first ? retry("first send", () -> producer.send(m, mq, SEND_TIMEOUT_MS))
                    : producer.send(m, mq, SEND_TIMEOUT_MS);
                first = false;
                checkSent(r, "message " + i);
                write(out, entry("msg", m, topic, mq.getQueueId(), r.getQueueOffset(), r.getOffsetMsgId(),
                    r.getMsgId(), false));
                nextOffset.put(mq, r.getQueueOffset() + 1);
                sent++;
                i++;
            }

            // One delay-level message: stored first in SCHEDULE_TOPIC_XXXX (queue level-1), then
            // delivered to its real queue by the broker's schedule service.
            MessageQueue delayMq = new MessageQueue(TOPICS[0], brokerName, 1);
            Message delayed = message(TOPICS[0], count, "delayed message".getBytes(StandardCharsets.UTF_8), true);
            delayed.setDelayTimeLevel(DELAY_LEVEL);
            SendResult dr = producer.send(delayed, delayMq, SEND_TIMEOUT_MS);
            checkSent(dr, "delayed message");
            JSONObject original = entry("delay-original", delayed, SCHEDULE_TOPIC, DELAY_LEVEL - 1,
                dr.getQueueOffset(), dr.getOffsetMsgId(), dr.getMsgId(), false);
            original.put("realTopic", TOPICS[0]);
            original.put("realQueueId", delayMq.getQueueId());
            original.put("delayMillis", DELAY_LEVEL_MILLIS);
            write(out, original);
            long expected = nextOffset.getOrDefault(delayMq, 0L);
            MessageExt delivered = awaitDelivery(pull, delayMq, expected, dr.getMsgId());
            JSONObject d = entry("delay-delivered", delayed, TOPICS[0], delayMq.getQueueId(), delivered.getQueueOffset(),
                ((MessageClientExt) delivered).getOffsetMsgId(), delivered.getMsgId(), false);
            // The delivered copy carries the broker's bookkeeping (REAL_TOPIC, ...), not DELAY: compare the
            // producer's own properties only.
            JSONObject props = d.getJSONObject("properties");
            props.remove("DELAY");
            write(out, d);
            System.out.printf("produce: %d messages (%d batches) + 1 delayed (schedule offset %d, delivered at %d)%n",
                sent, batches, dr.getQueueOffset(), delivered.getQueueOffset());
        } finally {
            pull.shutdown();
            producer.shutdown();
        }
    }

    static void checkSent(SendResult r, String what) {
        if (r == null || r.getSendStatus() != SendStatus.SEND_OK) {
            throw new IllegalStateException(what + ": " + r);
        }
    }

    static void write(BufferedWriter out, JSONObject o) throws IOException {
        out.write(JSON.toJSONString(o));
        out.newLine();
    }

    /** Pulls the real queue at the offset the delivered copy must get, until it shows up. */
    static MessageExt awaitDelivery(DefaultMQPullConsumer pull, MessageQueue mq, long offset, String uniqKey)
        throws Exception {
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (System.currentTimeMillis() < deadline) {
            PullResult r = pull.pull(mq, "*", offset, 1);
            if (r.getPullStatus() == PullStatus.FOUND) {
                for (MessageExt m : r.getMsgFoundList()) {
                    if (uniqKey.equals(m.getMsgId())) {
                        return m;
                    }
                    throw new IllegalStateException("offset " + offset + " of " + mq + " holds " + m.getMsgId()
                        + ", not the delayed message " + uniqKey);
                }
            }
            Thread.sleep(RETRY_PAUSE_MS);
        }
        throw new IllegalStateException("delayed message " + uniqKey + " not delivered to " + mq + " within "
            + STEP_TIMEOUT_MS + " ms");
    }

    // ------------------------------------------------------------------------------------------
    // consume: read Comet's store through Apache

    static List<JSONObject> readManifest(Path manifest) throws IOException {
        List<JSONObject> out = new ArrayList<>();
        try (BufferedReader r = Files.newBufferedReader(manifest, StandardCharsets.UTF_8)) {
            String line;
            while ((line = r.readLine()) != null) {
                if (!line.isBlank()) {
                    out.add(JSON.parseObject(line));
                }
            }
        }
        return out;
    }

    static int consume(String namesrv, String brokerName, Path manifestPath) throws Exception {
        List<JSONObject> manifest = readManifest(manifestPath);
        Map<String, Map<Integer, TreeMap<Long, JSONObject>>> expected = new TreeMap<>();
        for (JSONObject e : manifest) {
            expected.computeIfAbsent(e.getString("topic"), t -> new TreeMap<>())
                .computeIfAbsent(e.getInteger("queueId"), q -> new TreeMap<>())
                .put(e.getLong("queueOffset"), e);
        }
        List<String> failures = new ArrayList<>();
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer("CometStoreCompatReader");
        consumer.setNamesrvAddr(namesrv);
        consumer.setVipChannelEnabled(false);
        consumer.start();
        int compared = 0;
        int queries = 0;
        try {
            for (Map.Entry<String, Map<Integer, TreeMap<Long, JSONObject>>> t : expected.entrySet()) {
                String topic = t.getKey();
                for (Map.Entry<Integer, TreeMap<Long, JSONObject>> q : t.getValue().entrySet()) {
                    MessageQueue mq = new MessageQueue(topic, brokerName, q.getKey());
                    TreeMap<Long, JSONObject> want = q.getValue();
                    long min = retry("minOffset " + mq, () -> consumer.minOffset(mq));
                    long max = consumer.maxOffset(mq);
                    if (min != 0 || max != want.size()) {
                        failures.add(mq + ": Apache reports offsets [" + min + ", " + max + "), manifest has "
                            + want.size() + " messages from 0");
                    }
                    long offset = 0;
                    while (offset < max) {
                        PullResult r = consumer.pull(mq, "*", offset, PULL_BATCH);
                        if (r.getPullStatus() != PullStatus.FOUND) {
                            failures.add(mq + "@" + offset + ": pull answered " + r.getPullStatus());
                            break;
                        }
                        for (MessageExt m : r.getMsgFoundList()) {
                            JSONObject e = want.get(m.getQueueOffset());
                            if (e == null) {
                                failures.add(mq + "@" + m.getQueueOffset() + ": not in the manifest");
                            } else {
                                compare(e, m, failures);
                                compared++;
                            }
                        }
                        if (r.getNextBeginOffset() <= offset) {
                            failures.add(mq + "@" + offset + ": pull did not advance");
                            break;
                        }
                        offset = r.getNextBeginOffset();
                    }
                }
            }
            for (int i = 0; i < manifest.size(); i += QUERY_SAMPLE_EVERY) {
                queries += lookUp(consumer, manifest.get(i), failures);
            }
        } finally {
            consumer.shutdown();
        }
        int shown = Math.min(failures.size(), 50);
        for (String f : failures.subList(0, shown)) {
            System.out.println("MISMATCH " + f);
        }
        System.out.printf("consume: Comet -> Apache: %d manifest entries, %d messages compared, %d index/id lookups, "
            + "%d mismatches%n", manifest.size(), compared, queries, failures.size());
        return failures.size() + (compared == manifest.size() ? 0 : 1);
    }

    static void expectEqual(String what, Object want, Object got, JSONObject e, List<String> failures) {
        if (want == null ? got != null : !want.equals(got)) {
            failures.add(e.getString("topic") + "/" + e.getInteger("queueId") + "@" + e.getLong("queueOffset") + " "
                + what + ": want " + want + ", got " + got);
        }
    }

    static void compare(JSONObject e, MessageExt m, List<String> failures) throws NoSuchAlgorithmException {
        expectEqual("topic", e.getString("topic"), m.getTopic(), e, failures);
        expectEqual("queueId", e.getInteger("queueId"), m.getQueueId(), e, failures);
        expectEqual("commitLogOffset", e.getLong("commitLogOffset"), m.getCommitLogOffset(), e, failures);
        expectEqual("offsetMsgId", e.getString("offsetMsgId"), ((MessageClientExt) m).getOffsetMsgId(), e, failures);
        expectEqual("uniqKey", e.getString("uniqKey"), m.getMsgId(), e, failures);
        byte[] body = HexFormat.of().parseHex(e.getString("bodyHex"));
        expectEqual("body sha256", sha256(body), sha256(m.getBody()), e, failures);
        expectEqual("flag", e.getInteger("flag"), m.getFlag(), e, failures);
        // The client clears the compression bits when it inflates the body; compare the others.
        expectEqual("sysFlag", e.getInteger("sysFlag") & ~COMPRESSION_BITS, m.getSysFlag() & ~COMPRESSION_BITS, e,
            failures);
        expectEqual("tags", e.getString("tags"), m.getTags(), e, failures);
        expectEqual("keys", e.getString("keys"), m.getKeys(), e, failures);
        JSONObject props = e.getJSONObject("properties");
        for (String k : props.keySet()) {
            expectEqual("property " + k, props.getString(k), m.getProperty(k), e, failures);
        }
    }

    /** Looks one manifest entry up through Apache's index (by key, by UNIQ_KEY) and by offset id. */
    static int lookUp(DefaultMQPullConsumer consumer, JSONObject e, List<String> failures) throws Exception {
        String topic = e.getString("topic");
        String uniq = e.getString("uniqKey");
        String key = e.getString("keys").split(" ")[0];
        QueryResult byKey = consumer.queryMessage(topic, key, QUERY_MAX_NUM, 0, Long.MAX_VALUE);
        boolean found = byKey.getMessageList().stream().anyMatch(m -> uniq.equals(m.getMsgId()));
        if (!found) {
            failures.add("index query " + topic + "#" + key + " did not return " + uniq + " (got "
                + byKey.getMessageList().size() + " messages)");
        }
        MessageExt byUniq = consumer.getDefaultMQPullConsumerImpl().queryMessageByUniqKey(topic, uniq);
        if (byUniq == null || !uniq.equals(byUniq.getMsgId())) {
            failures.add("index query by UNIQ_KEY " + topic + "#" + uniq + " returned " + byUniq);
        }
        MessageExt byId = consumer.viewMessage(topic, e.getString("offsetMsgId"));
        if (byId == null || byId.getCommitLogOffset() != e.getLong("commitLogOffset") || !uniq.equals(byId.getMsgId())) {
            failures.add("viewMessage " + e.getString("offsetMsgId") + " returned " + byId);
        }
        return 3;
    }
}
