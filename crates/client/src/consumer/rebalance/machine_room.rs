//! Machine-room aware allocation strategies, for groups whose brokers and consumers are spread
//! over several data centres (machine rooms, IDCs).
//!
//! - [`AllocateMessageQueueByMachineRoom`] (`MACHINE_ROOM`): only queues of brokers named
//!   `room@name` whose room is in the consumer's set of rooms are shared out, in blocks with the
//!   remainder dealt one each to the first members.
//! - [`AllocateMachineRoomNearby`] (`MACHINE_ROOM_NEARBY-<inner>`): each member takes its share
//!   of the queues in its own room with an inner strategy; queues of a room without any member
//!   are shared by the whole group with the same inner strategy. A [`MachineRoomResolver`] tells
//!   the room of a queue and of a consumer id.
//!
//! Both follow the Java client's classes of the same names exactly, so mixed Java and Comet
//! groups agree on who reads what.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::super::MessageQueue;
use super::allocate::{AllocateError, AllocateMessageQueueStrategy, member_index};

/// Shares out the queues of the brokers deployed in the given machine rooms (`MACHINE_ROOM`).
///
/// A broker's room is the part of its name before `@` (`room1@broker-a`); brokers whose name
/// does not split into exactly two parts on `@` are never allocated.
#[derive(Debug, Clone, Default)]
pub struct AllocateMessageQueueByMachineRoom {
    consumer_idcs: BTreeSet<String>,
}

impl AllocateMessageQueueByMachineRoom {
    /// A strategy over the brokers of `consumer_idcs`.
    pub fn new<I, S>(consumer_idcs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        AllocateMessageQueueByMachineRoom {
            consumer_idcs: consumer_idcs.into_iter().map(Into::into).collect(),
        }
    }

    /// The machine rooms whose brokers this strategy allocates.
    pub fn consumer_idcs(&self) -> &BTreeSet<String> {
        &self.consumer_idcs
    }
}

/// The room of a broker named `room@name`: Java's `split("@")` (trailing empty parts dropped)
/// must give exactly two parts.
fn broker_room(broker_name: &str) -> Option<&str> {
    let mut parts: Vec<&str> = broker_name.split('@').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    match parts.as_slice() {
        [room, _] => Some(room),
        _ => None,
    }
}

impl AllocateMessageQueueStrategy for AllocateMessageQueueByMachineRoom {
    fn allocate(
        &self,
        _consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        let Some(index) = member_index(current_cid, mq_all, cid_all) else {
            return Vec::new();
        };
        let in_rooms: Vec<&MessageQueue> = mq_all
            .iter()
            .filter(|mq| {
                broker_room(&mq.broker_name).is_some_and(|r| self.consumer_idcs.contains(r))
            })
            .collect();
        let members = cid_all.len();
        let block = in_rooms.len() / members;
        let rem = in_rooms.len() % members;
        let start = block * index;
        let mut result: Vec<MessageQueue> = in_rooms
            .iter()
            .skip(start)
            .take(block)
            .map(|mq| (*mq).clone())
            .collect();
        if rem > index
            && let Some(extra) = in_rooms.get(index + block * members)
        {
            result.push((*extra).clone());
        }
        result
    }

    fn name(&self) -> &'static str {
        "MACHINE_ROOM"
    }
}

/// Tells which machine room a queue's broker and a consumer are deployed in. An empty answer
/// means "unknown", which makes [`AllocateMachineRoomNearby`] refuse to allocate.
pub trait MachineRoomResolver: Send + Sync + 'static {
    /// The machine room of the broker holding `mq`.
    fn broker_deploy_in(&self, mq: &MessageQueue) -> String;
    /// The machine room of the consumer `client_id`.
    fn consumer_deploy_in(&self, client_id: &str) -> String;
}

/// Prefers queues in the consumer's own machine room (`MACHINE_ROOM_NEARBY-<inner>`).
///
/// Each member gets, by the inner strategy, its share of its room's queues among its room's
/// members, plus its share among all members of the queues of every room that has no member.
pub struct AllocateMachineRoomNearby {
    inner: Arc<dyn AllocateMessageQueueStrategy>,
    resolver: Arc<dyn MachineRoomResolver>,
}

impl std::fmt::Debug for AllocateMachineRoomNearby {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllocateMachineRoomNearby")
            .field("inner", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl AllocateMachineRoomNearby {
    /// Wraps `inner`, grouping queues and consumers by `resolver`'s rooms.
    pub fn new(
        inner: Arc<dyn AllocateMessageQueueStrategy>,
        resolver: Arc<dyn MachineRoomResolver>,
    ) -> Self {
        AllocateMachineRoomNearby { inner, resolver }
    }
}

impl AllocateMessageQueueStrategy for AllocateMachineRoomNearby {
    /// [`try_allocate`](AllocateMessageQueueStrategy::try_allocate), with nothing allocated when
    /// a room cannot be resolved.
    fn allocate(
        &self,
        consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        self.try_allocate(consumer_group, current_cid, mq_all, cid_all)
            .unwrap_or_else(|e| {
                tracing::error!(group = consumer_group, error = %e, "machine room allocation failed");
                Vec::new()
            })
    }

    fn try_allocate(
        &self,
        consumer_group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Result<Vec<MessageQueue>, AllocateError> {
        if member_index(current_cid, mq_all, cid_all).is_none() {
            return Ok(Vec::new());
        }
        let mut room_queues: BTreeMap<String, Vec<MessageQueue>> = BTreeMap::new();
        for mq in mq_all {
            let room = self.resolver.broker_deploy_in(mq);
            if room.is_empty() {
                return Err(AllocateError::UnknownMachineRoom(mq.to_string()));
            }
            room_queues.entry(room).or_default().push(mq.clone());
        }
        let mut room_members: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for cid in cid_all {
            let room = self.resolver.consumer_deploy_in(cid);
            if room.is_empty() {
                return Err(AllocateError::UnknownMachineRoom(format!("consumer {cid}")));
            }
            room_members.entry(room).or_default().push(cid.clone());
        }
        let mut result = Vec::new();
        let own_room = self.resolver.consumer_deploy_in(current_cid);
        if let Some(local) = room_queues.remove(&own_room)
            && !local.is_empty()
        {
            let members = room_members.get(&own_room).map_or(&[][..], Vec::as_slice);
            result.extend(
                self.inner
                    .try_allocate(consumer_group, current_cid, &local, members)?,
            );
        }
        for (room, queues) in &room_queues {
            if !room_members.contains_key(room) {
                result.extend(self.inner.try_allocate(
                    consumer_group,
                    current_cid,
                    queues,
                    cid_all,
                )?);
            }
        }
        Ok(result)
    }

    fn name(&self) -> &'static str {
        match self.inner.name() {
            "AVG" => "MACHINE_ROOM_NEARBY-AVG",
            "AVG_BY_CIRCLE" => "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE",
            "CONSISTENT_HASH" => "MACHINE_ROOM_NEARBY-CONSISTENT_HASH",
            "CONFIG" => "MACHINE_ROOM_NEARBY-CONFIG",
            "MACHINE_ROOM" => "MACHINE_ROOM_NEARBY-MACHINE_ROOM",
            _ => "MACHINE_ROOM_NEARBY",
        }
    }
}

#[cfg(test)]
mod tests {
    //! Expected lines are the output of `interop/java` `dev.comet.interop.AllocateRooms`, run
    //! against Apache RocketMQ's rocketmq-client 5.3.3 (its `AllocateMessageQueueByMachineRoom`
    //! and `AllocateMachineRoomNearby`) with the same inputs.

    use super::*;
    use crate::consumer::rebalance::{
        AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle,
    };

    fn queues(broker: &str, count: i32) -> Vec<MessageQueue> {
        (0..count)
            .map(|q| MessageQueue::new("T", broker, q))
            .collect()
    }

    fn cids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    /// The lines `AllocateRooms` prints for one case: `<case> <cid> -> <broker>:<qid>,...`.
    fn lines(
        case: &str,
        strategy: &dyn AllocateMessageQueueStrategy,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<String> {
        cid_all
            .iter()
            .map(|cid| {
                let got: Vec<String> = strategy
                    .allocate("G", cid, mq_all, cid_all)
                    .iter()
                    .map(|mq| format!("{}:{}", mq.broker_name, mq.queue_id))
                    .collect();
                format!("{case} {cid} -> {}", got.join(","))
            })
            .collect()
    }

    fn room_queues() -> Vec<MessageQueue> {
        let mut all = queues("room1@broker-a", 4);
        all.extend(queues("room2@broker-b", 4));
        all.extend(queues("broker-c", 2));
        all.extend(queues("room1@x@y", 1));
        all.extend(queues("@broker-d", 2));
        all
    }

    #[test]
    fn by_machine_room_matches_java() {
        let mq_all = room_queues();
        let three = cids(&["c1", "c2", "c3"]);
        let by_room =
            |rooms: &[&str]| AllocateMessageQueueByMachineRoom::new(rooms.iter().copied());
        let mut got = lines("room1", &by_room(&["room1"]), &mq_all, &three);
        got.extend(lines(
            "room12",
            &by_room(&["room1", "room2"]),
            &mq_all,
            &three,
        ));
        got.extend(lines("room3", &by_room(&["room3"]), &mq_all, &three));
        got.extend(lines(
            "empty-idc",
            &by_room(&[""]),
            &mq_all,
            &cids(&["c1", "c2"]),
        ));
        let java = [
            "room1 c1 -> room1@broker-a:0,room1@broker-a:3",
            "room1 c2 -> room1@broker-a:1",
            "room1 c3 -> room1@broker-a:2",
            "room12 c1 -> room1@broker-a:0,room1@broker-a:1,room2@broker-b:2",
            "room12 c2 -> room1@broker-a:2,room1@broker-a:3,room2@broker-b:3",
            "room12 c3 -> room2@broker-b:0,room2@broker-b:1",
            "room3 c1 -> ",
            "room3 c2 -> ",
            "room3 c3 -> ",
            "empty-idc c1 -> @broker-d:0",
            "empty-idc c2 -> @broker-d:1",
        ];
        assert_eq!(got, java);
        assert_eq!(by_room(&["room1"]).name(), "MACHINE_ROOM");
        // A member outside the group gets nothing.
        assert!(
            by_room(&["room1"])
                .allocate("G", "c9", &mq_all, &three)
                .is_empty()
        );
    }

    /// Rooms are the part of a broker name or a client id before the first `-`.
    struct DashResolver;

    impl MachineRoomResolver for DashResolver {
        fn broker_deploy_in(&self, mq: &MessageQueue) -> String {
            mq.broker_name
                .split('-')
                .next()
                .unwrap_or_default()
                .to_owned()
        }

        fn consumer_deploy_in(&self, client_id: &str) -> String {
            client_id.split('-').next().unwrap_or_default().to_owned()
        }
    }

    fn nearby(inner: Arc<dyn AllocateMessageQueueStrategy>) -> AllocateMachineRoomNearby {
        AllocateMachineRoomNearby::new(inner, Arc::new(DashResolver))
    }

    #[test]
    fn machine_room_nearby_matches_java() {
        let mut idcs = queues("IDC1-b1", 4);
        idcs.extend(queues("IDC2-b2", 4));
        idcs.extend(queues("IDC3-b3", 3));
        let mixed = cids(&["IDC1-c1", "IDC1-c2", "IDC2-c1"]);
        let avg = nearby(Arc::new(AllocateMessageQueueAveragely));
        let circle = nearby(Arc::new(AllocateMessageQueueAveragelyByCircle));
        let mut got = lines("nearby-avg", &avg, &idcs, &mixed);
        got.extend(lines("nearby-circle", &circle, &idcs, &mixed));
        got.extend(lines(
            "nearby-one-room",
            &avg,
            &idcs,
            &cids(&["IDC1-c1", "IDC1-c2"]),
        ));
        got.extend(lines(
            "nearby-no-local",
            &avg,
            &idcs[..4],
            &cids(&["IDC2-c1", "IDC3-c1", "IDC3-c2"]),
        ));
        let java = [
            "nearby-avg IDC1-c1 -> IDC1-b1:0,IDC1-b1:1,IDC3-b3:0",
            "nearby-avg IDC1-c2 -> IDC1-b1:2,IDC1-b1:3,IDC3-b3:1",
            "nearby-avg IDC2-c1 -> IDC2-b2:0,IDC2-b2:1,IDC2-b2:2,IDC2-b2:3,IDC3-b3:2",
            "nearby-circle IDC1-c1 -> IDC1-b1:0,IDC1-b1:2,IDC3-b3:0",
            "nearby-circle IDC1-c2 -> IDC1-b1:1,IDC1-b1:3,IDC3-b3:1",
            "nearby-circle IDC2-c1 -> IDC2-b2:0,IDC2-b2:1,IDC2-b2:2,IDC2-b2:3,IDC3-b3:2",
            "nearby-one-room IDC1-c1 -> IDC1-b1:0,IDC1-b1:1,IDC2-b2:0,IDC2-b2:1,IDC3-b3:0,IDC3-b3:1",
            "nearby-one-room IDC1-c2 -> IDC1-b1:2,IDC1-b1:3,IDC2-b2:2,IDC2-b2:3,IDC3-b3:2",
            "nearby-no-local IDC2-c1 -> IDC1-b1:0,IDC1-b1:1",
            "nearby-no-local IDC3-c1 -> IDC1-b1:2",
            "nearby-no-local IDC3-c2 -> IDC1-b1:3",
        ];
        assert_eq!(got, java);
        assert_eq!(avg.name(), "MACHINE_ROOM_NEARBY-AVG");
        assert_eq!(circle.name(), "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE");
    }

    #[test]
    fn an_unresolved_room_refuses_to_allocate() {
        let avg = nearby(Arc::new(AllocateMessageQueueAveragely));
        let mut mq_all = queues("IDC1-b1", 2);
        mq_all.push(MessageQueue::new("T", "", 0));
        let cid_all = cids(&["IDC1-c1"]);
        let err = avg
            .try_allocate("G", "IDC1-c1", &mq_all, &cid_all)
            .expect_err("a queue without a room");
        assert!(err.to_string().contains("machine room"), "{err}");
        assert!(avg.allocate("G", "IDC1-c1", &mq_all, &cid_all).is_empty());
        let err = avg
            .try_allocate("G", "IDC1-c1", &mq_all[..2], &cids(&["IDC1-c1", "-x"]))
            .expect_err("a consumer without a room");
        assert!(err.to_string().contains("consumer -x"), "{err}");
    }
}
