//! Routes as a client uses them: which queues a producer may write to ([`TopicPublishInfo`]) and
//! which queues a consumer group shares out ([`subscribe_queues`]), both derived from the name
//! server's `TopicRouteData` exactly as the Java client derives them, because rebalance only works
//! if every member of a group — Java, Go or Rust — computes the same list.
//!
//! Also here: the TBW102 fallback of topic auto-creation (a producer sending to a topic that does
//! not exist yet uses the template topic's route, with the queue counts capped at its own default)
//! and route change detection for the periodic refresh.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};

use comet_protocol::body::{MessageQueue, TopicRouteData};

/// Separator of `brokerName:queueNum` entries in `orderTopicConf`.
const ORDER_CONF_ENTRY_SEPARATOR: char = ';';
/// Separator of broker name and queue count in one `orderTopicConf` entry.
const ORDER_CONF_FIELD_SEPARATOR: char = ':';
/// Mask that keeps a queue counter non-negative, as Java's `& 0x7FFFFFFF`.
const NON_NEGATIVE_MASK: u32 = 0x7FFF_FFFF;

/// The queues a producer may send a topic's messages to, with the round-robin cursor.
#[derive(Debug)]
pub struct TopicPublishInfo {
    /// The route came from `orderTopicConf`: queue ids are stable and meaningful to the user.
    pub order_topic: bool,
    /// The name server knew the topic (false for a placeholder while the route is unknown).
    pub have_topic_router_info: bool,
    /// Writable queues of master brokers, brokers in name order.
    pub message_queues: Vec<MessageQueue>,
    /// The route this was derived from.
    pub route: TopicRouteData,
    /// Round-robin cursor; starts at a random value so that producers spread out.
    send_which_queue: AtomicU32,
}

impl TopicPublishInfo {
    /// The publish list of `topic` from `route`: from `orderTopicConf` when present;
    /// otherwise the writable QueueDatas sorted by broker name, skipping brokers without a master.
    pub fn from_route(topic: &str, route: &TopicRouteData) -> Self {
        let mut message_queues = Vec::new();
        let order_conf = route.order_topic_conf.as_deref().filter(|c| !c.is_empty());
        let order_topic = order_conf.is_some();
        if let Some(conf) = order_conf {
            for entry in conf.split(ORDER_CONF_ENTRY_SEPARATOR) {
                let mut fields = entry.split(ORDER_CONF_FIELD_SEPARATOR);
                let (Some(broker), Some(nums)) = (fields.next(), fields.next()) else {
                    continue;
                };
                let Ok(nums) = nums.trim().parse::<i32>() else {
                    continue;
                };
                message_queues
                    .extend((0..nums).map(|i| MessageQueue::new(topic, broker.trim(), i)));
            }
        } else {
            let mut queue_datas: Vec<_> = route.queue_datas.iter().collect();
            queue_datas.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
            for qd in queue_datas {
                if !qd.is_writeable() {
                    continue;
                }
                let has_master = route
                    .broker_datas
                    .iter()
                    .any(|bd| bd.broker_name == qd.broker_name && bd.master_addr().is_some());
                if !has_master {
                    continue;
                }
                message_queues.extend(
                    (0..qd.write_queue_nums).map(|i| MessageQueue::new(topic, &qd.broker_name, i)),
                );
            }
        }
        TopicPublishInfo {
            order_topic,
            have_topic_router_info: true,
            message_queues,
            route: route.clone(),
            send_which_queue: AtomicU32::new(random_start()),
        }
    }

    /// Whether there is at least one queue to send to.
    pub fn ok(&self) -> bool {
        !self.message_queues.is_empty()
    }

    /// Advances the round-robin cursor and returns its new value (non-negative).
    pub(crate) fn next_index(&self) -> usize {
        (self.send_which_queue.fetch_add(1, Ordering::Relaxed) & NON_NEGATIVE_MASK) as usize
    }

    /// The next queue round-robin.
    pub fn select_one(&self) -> Option<MessageQueue> {
        let len = self.message_queues.len();
        if len == 0 {
            return None;
        }
        self.message_queues.get(self.next_index() % len).cloned()
    }

    /// The next queue round-robin, avoiding `last_broker` (the broker of a failed attempt) if any
    /// other broker has queues, as the Java producer does.
    pub fn select_one_avoiding(&self, last_broker: Option<&str>) -> Option<MessageQueue> {
        let Some(last) = last_broker else {
            return self.select_one();
        };
        let len = self.message_queues.len();
        for _ in 0..len {
            let candidate = self.message_queues.get(self.next_index() % len)?;
            if candidate.broker_name != last {
                return Some(candidate.clone());
            }
        }
        self.select_one()
    }

    /// Number of writable queues the route gives `broker_name` (−1 when it has none).
    pub fn write_queue_nums_of(&self, broker_name: &str) -> i32 {
        self.route
            .queue_datas
            .iter()
            .find(|qd| qd.broker_name == broker_name)
            .map_or(-1, |qd| qd.write_queue_nums)
    }
}

/// The subscribe set of `topic` from `route`: queues 0..readQueueNums of every readable
/// QueueData, sorted by (topic, brokerName, queueId) — the order rebalance needs.
pub fn subscribe_queues(topic: &str, route: &TopicRouteData) -> Vec<MessageQueue> {
    let mut queues: Vec<MessageQueue> = route
        .queue_datas
        .iter()
        .filter(|qd| qd.is_readable())
        .flat_map(|qd| {
            (0..qd.read_queue_nums).map(|i| MessageQueue::new(topic, &qd.broker_name, i))
        })
        .collect();
    queues.sort();
    queues.dedup();
    queues
}

/// The route to use for a topic that does not exist yet, from the template (TBW102) topic's route,
/// as the Java producer builds it: every QueueData's read and write counts become
/// `min(default_queue_nums, read)`.
pub fn auto_create_route(mut template: TopicRouteData, default_queue_nums: i32) -> TopicRouteData {
    for qd in &mut template.queue_datas {
        let nums = default_queue_nums.min(qd.read_queue_nums);
        qd.read_queue_nums = nums;
        qd.write_queue_nums = nums;
    }
    template
}

/// Whether two routes differ in anything but the order of their lists.
pub fn route_changed(old: Option<&TopicRouteData>, new: &TopicRouteData) -> bool {
    match old {
        None => true,
        Some(old) => normalized(old) != normalized(new),
    }
}

fn normalized(route: &TopicRouteData) -> TopicRouteData {
    let mut route = route.clone();
    route
        .queue_datas
        .sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    route
        .broker_datas
        .sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    route
}

/// A random starting point for a round-robin cursor (std's per-process random hash keys).
pub(crate) fn random_start() -> u32 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(u64::from(std::process::id()));
    (hasher.finish() as u32) & NON_NEGATIVE_MASK
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use comet_protocol::body::{BrokerData, QueueData, perm};

    use super::*;

    fn broker(name: &str, addrs: &[(i64, &str)]) -> BrokerData {
        BrokerData {
            cluster: "C".into(),
            broker_name: name.into(),
            broker_addrs: addrs
                .iter()
                .map(|(id, a)| (*id, (*a).to_string()))
                .collect::<BTreeMap<_, _>>(),
            ..Default::default()
        }
    }

    fn queue(name: &str, read: i32, write: i32, perm: i32) -> QueueData {
        QueueData {
            broker_name: name.into(),
            read_queue_nums: read,
            write_queue_nums: write,
            perm,
            topic_sys_flag: 0,
        }
    }

    fn sample_route() -> TopicRouteData {
        TopicRouteData {
            queue_datas: vec![
                queue("broker-b", 2, 3, perm::PERM_READ_WRITE),
                queue("broker-a", 4, 2, perm::PERM_READ_WRITE),
                queue("broker-c", 1, 1, perm::PERM_READ),
                queue("broker-d", 2, 2, perm::PERM_READ_WRITE),
            ],
            broker_datas: vec![
                broker("broker-a", &[(0, "10.0.0.1:10911")]),
                broker("broker-b", &[(0, "10.0.0.2:10911"), (1, "10.0.0.3:10911")]),
                broker("broker-c", &[(0, "10.0.0.4:10911")]),
                // Slave only: readable, not writable.
                broker("broker-d", &[(1, "10.0.0.5:10911")]),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn publish_list_is_writable_master_queues_in_broker_order() {
        let info = TopicPublishInfo::from_route("T", &sample_route());
        let got: Vec<_> = info
            .message_queues
            .iter()
            .map(|mq| (mq.broker_name.as_str(), mq.queue_id))
            .collect();
        assert_eq!(
            got,
            vec![
                ("broker-a", 0),
                ("broker-a", 1),
                ("broker-b", 0),
                ("broker-b", 1),
                ("broker-b", 2)
            ]
        );
        assert!(!info.order_topic);
        assert!(info.ok());
    }

    #[test]
    fn subscribe_set_is_readable_queues_sorted() {
        let queues = subscribe_queues("T", &sample_route());
        let got: Vec<_> = queues
            .iter()
            .map(|mq| (mq.broker_name.as_str(), mq.queue_id))
            .collect();
        assert_eq!(
            got,
            vec![
                ("broker-a", 0),
                ("broker-a", 1),
                ("broker-a", 2),
                ("broker-a", 3),
                ("broker-b", 0),
                ("broker-b", 1),
                ("broker-c", 0),
                ("broker-d", 0),
                ("broker-d", 1)
            ]
        );
    }

    #[test]
    fn order_topic_conf_overrides_queue_datas() {
        let mut route = sample_route();
        route.order_topic_conf = Some("broker-x:2;broker-y:1;bad;broker-z:nope".into());
        let info = TopicPublishInfo::from_route("T", &route);
        assert!(info.order_topic);
        let got: Vec<_> = info
            .message_queues
            .iter()
            .map(|mq| (mq.broker_name.as_str(), mq.queue_id))
            .collect();
        assert_eq!(got, vec![("broker-x", 0), ("broker-x", 1), ("broker-y", 0)]);
    }

    #[test]
    fn round_robin_visits_every_queue_and_avoids_the_failed_broker() {
        let info = TopicPublishInfo::from_route("T", &sample_route());
        let n = info.message_queues.len();
        let mut seen: Vec<_> = (0..n).filter_map(|_| info.select_one()).collect();
        seen.sort();
        let mut all = info.message_queues.clone();
        all.sort();
        assert_eq!(seen, all);
        for _ in 0..(3 * n) {
            let mq = info.select_one_avoiding(Some("broker-a")).expect("queue");
            assert_eq!(mq.broker_name, "broker-b");
        }
    }

    #[test]
    fn avoiding_the_only_broker_still_returns_a_queue() {
        let mut route = sample_route();
        route.queue_datas.retain(|qd| qd.broker_name == "broker-a");
        let info = TopicPublishInfo::from_route("T", &route);
        let mq = info.select_one_avoiding(Some("broker-a")).expect("queue");
        assert_eq!(mq.broker_name, "broker-a");
        let empty = TopicPublishInfo::from_route("T", &TopicRouteData::default());
        assert!(!empty.ok());
        assert_eq!(empty.select_one(), None);
        assert_eq!(empty.select_one_avoiding(Some("x")), None);
    }

    #[test]
    fn tbw102_route_is_capped_at_the_producer_default() {
        let template = TopicRouteData {
            queue_datas: vec![queue("broker-a", 8, 8, 7), queue("broker-b", 2, 2, 7)],
            broker_datas: vec![
                broker("broker-a", &[(0, "a:1")]),
                broker("broker-b", &[(0, "b:1")]),
            ],
            ..Default::default()
        };
        let route = auto_create_route(template, 4);
        let nums: Vec<_> = route
            .queue_datas
            .iter()
            .map(|qd| (qd.read_queue_nums, qd.write_queue_nums))
            .collect();
        assert_eq!(nums, vec![(4, 4), (2, 2)]);
        let info = TopicPublishInfo::from_route("NEW", &route);
        assert_eq!(info.message_queues.len(), 6);
        assert!(info.message_queues.iter().all(|mq| mq.topic == "NEW"));
    }

    #[test]
    fn route_change_ignores_list_order() {
        let a = sample_route();
        let mut b = a.clone();
        b.queue_datas.reverse();
        b.broker_datas.reverse();
        assert!(!route_changed(Some(&a), &b));
        b.queue_datas[0].write_queue_nums += 1;
        assert!(route_changed(Some(&a), &b));
        assert!(route_changed(None, &a));
    }
}
