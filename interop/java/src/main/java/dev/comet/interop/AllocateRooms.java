package dev.comet.interop;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMachineRoomNearby;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueByMachineRoom;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Prints what the Java client's machine-room strategies allocate to each consumer for fixed
 * inputs, one line per case and consumer: {@code <case> <cid> -> <broker>:<qid>,...}. The Rust
 * unit tests of the same strategies (crates/client/src/consumer/rebalance/machine_room.rs) expect
 * exactly these lines.
 *
 * <pre>java -cp target/5.3.3/classes:$(cat target/5.3.3/classpath.txt) dev.comet.interop.AllocateRooms</pre>
 */
public final class AllocateRooms {
    private AllocateRooms() {
    }

    private static List<MessageQueue> queues(String broker, int count) {
        List<MessageQueue> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(new MessageQueue("T", broker, i));
        }
        return out;
    }

    private static void print(String name, AllocateMessageQueueStrategy strategy, List<MessageQueue> mqAll,
        List<String> cidAll) {
        for (String cid : cidAll) {
            List<MessageQueue> got = strategy.allocate("G", cid, mqAll, cidAll);
            StringBuilder sb = new StringBuilder();
            for (MessageQueue mq : got) {
                if (sb.length() > 0) {
                    sb.append(',');
                }
                sb.append(mq.getBrokerName()).append(':').append(mq.getQueueId());
            }
            System.out.println(name + " " + cid + " -> " + sb);
        }
    }

    private static AllocateMessageQueueByMachineRoom byRoom(String... idcs) {
        AllocateMessageQueueByMachineRoom s = new AllocateMessageQueueByMachineRoom();
        s.setConsumeridcs(new HashSet<>(Arrays.asList(idcs)));
        return s;
    }

    public static void main(String[] args) {
        List<MessageQueue> rooms = new ArrayList<>();
        rooms.addAll(queues("room1@broker-a", 4));
        rooms.addAll(queues("room2@broker-b", 4));
        rooms.addAll(queues("broker-c", 2));
        rooms.addAll(queues("room1@x@y", 1));
        rooms.addAll(queues("@broker-d", 2));
        List<String> three = Arrays.asList("c1", "c2", "c3");
        print("room1", byRoom("room1"), rooms, three);
        print("room12", byRoom("room1", "room2"), rooms, three);
        print("room3", byRoom("room3"), rooms, three);
        print("empty-idc", byRoom(""), rooms, Arrays.asList("c1", "c2"));
        System.out.println("name " + byRoom("room1").getName());

        AllocateMachineRoomNearby.MachineRoomResolver resolver = new AllocateMachineRoomNearby.MachineRoomResolver() {
            @Override
            public String brokerDeployIn(MessageQueue mq) {
                return mq.getBrokerName().split("-")[0];
            }

            @Override
            public String consumerDeployIn(String clientId) {
                return clientId.split("-")[0];
            }
        };
        List<MessageQueue> idcs = new ArrayList<>();
        idcs.addAll(queues("IDC1-b1", 4));
        idcs.addAll(queues("IDC2-b2", 4));
        idcs.addAll(queues("IDC3-b3", 3));
        List<String> mixed = Arrays.asList("IDC1-c1", "IDC1-c2", "IDC2-c1");
        AllocateMachineRoomNearby avg = new AllocateMachineRoomNearby(new AllocateMessageQueueAveragely(), resolver);
        AllocateMachineRoomNearby circle =
            new AllocateMachineRoomNearby(new AllocateMessageQueueAveragelyByCircle(), resolver);
        print("nearby-avg", avg, idcs, mixed);
        print("nearby-circle", circle, idcs, mixed);
        print("nearby-one-room", avg, idcs, Arrays.asList("IDC1-c1", "IDC1-c2"));
        print("nearby-no-local", avg, idcs.subList(0, 4), Arrays.asList("IDC2-c1", "IDC3-c1", "IDC3-c2"));
        System.out.println("name " + avg.getName() + " " + circle.getName());
    }
}
