//! Topics: routes, topic lists, and the commands that create or delete a topic's route or
//! change the permissions of a broker's queues.

use comet_protocol::body::{QueueData, TopicList, perm};

use super::{
    BrokerAddrInfo, MAX_TOPICS, RouteInfoManager, TOPIC_SYS_FLAG_UNIT, TOPIC_SYS_FLAG_UNIT_SUB,
};

impl RouteInfoManager {
    /// The route of `topic`: its queue data and the brokers named there, or `None` when either
    /// set is empty.
    pub fn pickup_topic_route(&self, topic: &str) -> Option<comet_protocol::body::TopicRouteData> {
        let t = self.tables.read();
        let queues = t.topic_queue_table.get(topic)?;
        let mut route = comet_protocol::body::TopicRouteData {
            queue_datas: queues.values().cloned().collect(),
            ..Default::default()
        };
        for broker_name in queues.keys() {
            let Some(bd) = t.broker_addr_table.get(broker_name) else {
                continue;
            };
            if !t.filter_server_table.is_empty() {
                for addr in bd.broker_addrs.values() {
                    if let Some(servers) = t
                        .filter_server_table
                        .get(&BrokerAddrInfo::new(&bd.cluster, addr))
                    {
                        route
                            .filter_server_table
                            .insert(addr.clone(), servers.clone());
                    }
                }
            }
            route.broker_datas.push(bd.clone());
        }
        if route.queue_datas.is_empty() || route.broker_datas.is_empty() {
            return None;
        }
        Some(route)
    }

    /// Every topic with a route.
    pub fn all_topics(&self) -> TopicList {
        let t = self.tables.read();
        topic_list(t.topic_queue_table.keys().cloned())
    }

    /// DELETE_TOPIC_IN_NAMESRV: removes the topic, or only its queues on the brokers of
    /// `cluster_name` when given. Returns whether anything was removed.
    pub fn delete_topic(&self, topic: &str, cluster_name: Option<&str>) -> bool {
        let mut guard = self.tables.write();
        let t = &mut *guard;
        let Some(cluster_name) = cluster_name else {
            return t.topic_queue_table.remove(topic).is_some();
        };
        let Some(broker_names) = t.cluster_addr_table.get(cluster_name) else {
            return false;
        };
        let Some(queues) = t.topic_queue_table.get_mut(topic) else {
            return false;
        };
        let before = queues.len();
        queues.retain(|broker_name, _| !broker_names.contains(broker_name));
        let removed = queues.len() != before;
        if queues.is_empty() {
            t.topic_queue_table.remove(topic);
        }
        removed
    }

    /// REGISTER_TOPIC_IN_NAMESRV: creates a route for a topic that has none, when every broker
    /// named is registered. Returns whether the route was created.
    pub fn register_topic(&self, topic: &str, queue_datas: Vec<QueueData>) -> bool {
        if queue_datas.is_empty() || topic.is_empty() {
            return false;
        }
        let mut t = self.tables.write();
        if t.topic_queue_table.contains_key(topic) || t.topic_queue_table.len() >= MAX_TOPICS {
            return false;
        }
        if queue_datas
            .iter()
            .any(|qd| !t.broker_addr_table.contains_key(&qd.broker_name))
        {
            tracing::warn!(topic, "register topic names an unknown broker; ignored");
            return false;
        }
        let queues = queue_datas
            .into_iter()
            .map(|qd| (qd.broker_name.clone(), qd))
            .collect();
        t.topic_queue_table.insert(topic.to_string(), queues);
        true
    }

    /// Topics with queues on any broker of `cluster_name`.
    pub fn topics_by_cluster(&self, cluster_name: &str) -> TopicList {
        let t = self.tables.read();
        let Some(broker_names) = t.cluster_addr_table.get(cluster_name) else {
            return TopicList::default();
        };
        topic_list(
            t.topic_queue_table
                .iter()
                .filter(|(_, queues)| queues.keys().any(|b| broker_names.contains(b)))
                .map(|(topic, _)| topic.clone()),
        )
    }

    /// The system topics every broker creates for itself: cluster names and broker names, plus
    /// one broker address to query for the rest.
    pub fn system_topics(&self) -> TopicList {
        let t = self.tables.read();
        let mut list = topic_list(
            t.cluster_addr_table
                .iter()
                .flat_map(|(cluster, names)| std::iter::once(cluster).chain(names.iter()))
                .cloned(),
        );
        list.broker_addr = t
            .broker_addr_table
            .values()
            .find_map(|bd| bd.broker_addrs.values().next().cloned());
        list
    }

    /// Topics whose sys flag has the unit bit.
    pub fn unit_topics(&self) -> TopicList {
        self.topics_by_sys_flag(|flag| flag & TOPIC_SYS_FLAG_UNIT != 0)
    }

    /// Topics whose sys flag has the unit-sub bit.
    pub fn has_unit_sub_topics(&self) -> TopicList {
        self.topics_by_sys_flag(|flag| flag & TOPIC_SYS_FLAG_UNIT_SUB != 0)
    }

    /// Topics with the unit-sub bit but not the unit bit.
    pub fn has_unit_sub_non_unit_topics(&self) -> TopicList {
        self.topics_by_sys_flag(|flag| {
            flag & TOPIC_SYS_FLAG_UNIT == 0 && flag & TOPIC_SYS_FLAG_UNIT_SUB != 0
        })
    }

    fn topics_by_sys_flag(&self, keep: impl Fn(i32) -> bool) -> TopicList {
        let t = self.tables.read();
        topic_list(
            t.topic_queue_table
                .iter()
                .filter(|(_, queues)| {
                    queues
                        .values()
                        .next()
                        .is_some_and(|qd| keep(qd.topic_sys_flag))
                })
                .map(|(topic, _)| topic.clone()),
        )
    }

    /// WIPE_WRITE_PERM_OF_BROKER: clears the WRITE bit of every queue of `broker_name`
    /// (producers drain away before maintenance). Returns the number of topics touched.
    pub fn wipe_write_perm(&self, broker_name: &str) -> usize {
        self.update_perm_of_broker(broker_name, |p| p & !perm::PERM_WRITE)
    }

    /// ADD_WRITE_PERM_OF_BROKER: sets every queue of `broker_name` back to READ|WRITE. Returns
    /// the number of topics touched.
    pub fn add_write_perm(&self, broker_name: &str) -> usize {
        self.update_perm_of_broker(broker_name, |_| perm::PERM_READ_WRITE)
    }

    fn update_perm_of_broker(&self, broker_name: &str, f: impl Fn(i32) -> i32) -> usize {
        let mut t = self.tables.write();
        let mut count = 0;
        for queues in t.topic_queue_table.values_mut() {
            if let Some(qd) = queues.get_mut(broker_name) {
                qd.perm = f(qd.perm);
                count += 1;
            }
        }
        count
    }
}

fn topic_list(topics: impl Iterator<Item = String>) -> TopicList {
    TopicList {
        topic_list: topics.collect(),
        broker_addr: None,
    }
}
