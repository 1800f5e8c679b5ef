//! Topic routes of a client instance: fetched from the name server for every topic a registered
//! producer or consumer uses (at once when one asks, and every `poll_name_server_interval`),
//! handed to the producers as publish info and to the consumers as subscribe sets, and turned
//! into the broker address table every broker lookup reads.

use std::collections::HashSet;
use std::sync::Arc;

use comet_protocol::body::TopicRouteData;
use comet_protocol::body::route::MASTER_ID;

use super::{FindBrokerResult, MQClientInstance};
use crate::error::{ClientError, Result};
use crate::route::{
    TopicPublishInfo, auto_create_route, random_start, route_changed, subscribe_queues,
};

impl MQClientInstance {
    /// Fetches the route of `topic` and, if it changed (or a producer/consumer lacks it), hands
    /// the new publish info and subscribe set to every producer and consumer. `Ok(false)` when
    /// the name server does not know the topic or nothing changed.
    pub async fn update_topic_route_info_from_name_server(&self, topic: &str) -> Result<bool> {
        Ok(self.refresh_topic_route(topic).await?.unwrap_or(false))
    }

    /// [`Self::update_topic_route_info_from_name_server`], telling an unknown topic (`None`)
    /// from a known one (`Some(changed)`).
    pub async fn refresh_topic_route(&self, topic: &str) -> Result<Option<bool>> {
        let _guard = self.route_lock.lock().await;
        let route = self
            .api
            .get_topic_route_info_from_name_server(topic, self.config.mq_client_api_timeout)
            .await?;
        Ok(route.map(|route| self.apply_route(topic, route)))
    }

    /// The auto-creation path for a topic the name server does not know: installs as the route of
    /// `topic` the route of the template topic `default_topic` (TBW102) with queue counts capped at
    /// `default_queue_nums`, so a send can reach a broker that creates the topic. `Ok(false)` when
    /// the template topic itself has no route (auto-creation is off everywhere).
    pub async fn update_topic_route_info_from_default(
        &self,
        topic: &str,
        default_topic: &str,
        default_queue_nums: i32,
    ) -> Result<bool> {
        let _guard = self.route_lock.lock().await;
        let template = self
            .api
            .get_topic_route_info_from_name_server(default_topic, self.config.mq_client_api_timeout)
            .await?;
        match template {
            Some(template) => {
                let route = auto_create_route(template, default_queue_nums);
                Ok(self.apply_route(topic, route))
            }
            None => Ok(false),
        }
    }

    /// Installs `route` for `topic`; returns whether anything was updated.
    fn apply_route(&self, topic: &str, route: TopicRouteData) -> bool {
        let changed = route_changed(self.topic_routes.read().get(topic), &route);
        let producers: Vec<_> = self.producers.read().values().cloned().collect();
        let consumers: Vec<_> = self.consumers.read().values().cloned().collect();
        let needed = producers
            .iter()
            .any(|p| p.is_publish_topic_need_update(topic))
            || consumers
                .iter()
                .any(|c| c.is_subscribe_topic_need_update(topic));
        if !changed && !needed {
            return false;
        }
        {
            let mut addrs = self.broker_addrs.write();
            for bd in &route.broker_datas {
                addrs.insert(bd.broker_name.clone(), bd.broker_addrs.clone());
            }
        }
        if !producers.is_empty() {
            let info = Arc::new(TopicPublishInfo::from_route(topic, &route));
            for producer in &producers {
                producer.update_topic_publish_info(topic, Arc::clone(&info));
            }
        }
        if !consumers.is_empty() {
            let queues = subscribe_queues(topic, &route);
            for consumer in &consumers {
                consumer.update_topic_subscribe_info(topic, queues.clone());
            }
        }
        tracing::debug!(topic, "topic route updated");
        self.topic_routes.write().insert(topic.to_string(), route);
        true
    }

    /// Refreshes the route of every topic a registered producer or consumer uses, then drops
    /// brokers no route mentions any more.
    pub async fn update_topic_route_info_for_all(&self) {
        let mut topics: HashSet<String> = HashSet::new();
        for producer in self.producers.read().values() {
            topics.extend(producer.publish_topic_list());
        }
        for consumer in self.consumers.read().values() {
            topics.extend(consumer.subscriptions().into_iter().map(|s| s.topic));
        }
        for topic in topics {
            if let Err(e) = self.update_topic_route_info_from_name_server(&topic).await {
                tracing::debug!(topic = %topic, error = %e, "route refresh failed");
            }
        }
        self.clean_offline_brokers();
    }

    fn clean_offline_brokers(&self) {
        let live: HashSet<String> = self
            .topic_routes
            .read()
            .values()
            .flat_map(|r| r.broker_datas.iter().map(|bd| bd.broker_name.clone()))
            .collect();
        self.broker_addrs
            .write()
            .retain(|name, _| live.contains(name));
    }

    /// The last route fetched for `topic`.
    pub fn topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        self.topic_routes.read().get(topic).cloned()
    }

    /// The master address of `broker_name`.
    pub fn find_broker_address_in_publish(&self, broker_name: &str) -> Option<String> {
        self.broker_addrs
            .read()
            .get(broker_name)
            .and_then(|ids| ids.get(&MASTER_ID).cloned())
    }

    /// The address of broker `broker_id` of `broker_name`; unless `only_this`, any broker of
    /// that name when that id is not known.
    pub fn find_broker_address_in_subscribe(
        &self,
        broker_name: &str,
        broker_id: i64,
        only_this: bool,
    ) -> Option<FindBrokerResult> {
        let addrs = self.broker_addrs.read();
        let ids = addrs.get(broker_name)?;
        let (id, addr) = match ids.get(&broker_id) {
            Some(addr) => (broker_id, addr.clone()),
            None if !only_this => {
                let (id, addr) = ids.iter().next()?;
                (*id, addr.clone())
            }
            None => return None,
        };
        let broker_version = self.broker_versions.read().get(&addr).copied().unwrap_or(0);
        Some(FindBrokerResult {
            broker_addr: addr,
            slave: id != MASTER_ID,
            broker_version,
        })
    }

    /// The address of broker `broker_name`'s master, or of one of its slaves while no master
    /// is known (Java `findBrokerAddressInAdmin`). Offsets are read and committed here: a slave
    /// answers from the offsets it synced from its master and keeps what it is sent until the
    /// master is back.
    pub fn find_broker_address_in_admin(&self, broker_name: &str) -> Option<FindBrokerResult> {
        self.find_broker_address_in_subscribe(broker_name, MASTER_ID, false)
    }

    /// The address of some broker serving `topic` (a master when there is one).
    pub fn any_broker_addr_of_topic(&self, topic: &str) -> Option<String> {
        let routes = self.topic_routes.read();
        let route = routes.get(topic)?;
        let count = route.broker_datas.len();
        if count == 0 {
            return None;
        }
        let start = random_start() as usize;
        (0..count).find_map(|step| {
            let bd = route.broker_datas.get((start + step) % count)?;
            bd.master_addr()
                .map(str::to_string)
                .or_else(|| bd.broker_addrs.values().next().cloned())
        })
    }

    /// The client ids of `group`'s consumers, asked of a broker serving `topic`.
    pub async fn find_consumer_id_list(&self, topic: &str, group: &str) -> Result<Vec<String>> {
        if self.any_broker_addr_of_topic(topic).is_none() {
            self.update_topic_route_info_from_name_server(topic).await?;
        }
        let addr = self
            .any_broker_addr_of_topic(topic)
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
                namesrv: self.config.namesrv_addr.clone(),
                reason: crate::error::NoRouteReason::TopicNotExist,
            })?;
        self.api
            .get_consumer_id_list_by_group(&addr, group, self.config.mq_client_api_timeout)
            .await
    }

    /// Every known broker address (masters and slaves), sorted, without duplicates.
    pub(super) fn all_broker_addrs(&self) -> Vec<String> {
        let mut addrs: Vec<String> = self
            .broker_addrs
            .read()
            .values()
            .flat_map(|ids| ids.values().cloned())
            .collect();
        addrs.sort();
        addrs.dedup();
        addrs
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::test_support::{CountingProducer, config, route};
    use super::*;

    #[test]
    fn routes_feed_producers_and_broker_lookup() {
        let instance = MQClientInstance::new(config("routes"), "x@routes".to_string());
        let producer = Arc::new(CountingProducer {
            updates: AtomicUsize::new(0),
        });
        instance
            .register_producer("g", producer.clone())
            .expect("registers");
        assert!(instance.apply_route("T", route()));
        assert!(
            !instance.apply_route("T", route()),
            "unchanged route is not re-applied"
        );
        assert_eq!(producer.updates.load(Ordering::SeqCst), 1);
        assert_eq!(
            instance.find_broker_address_in_publish("b").as_deref(),
            Some("m:1")
        );
        let slave = instance
            .find_broker_address_in_subscribe("b", 1, true)
            .expect("slave known");
        assert_eq!(slave.broker_addr, "s:1");
        assert!(slave.slave);
        assert!(
            instance
                .find_broker_address_in_subscribe("b", 2, true)
                .is_none()
        );
        let any = instance
            .find_broker_address_in_subscribe("b", 2, false)
            .expect("falls back");
        assert_eq!(any.broker_addr, "m:1");
        assert!(!any.slave);
        assert_eq!(
            instance.any_broker_addr_of_topic("T").as_deref(),
            Some("m:1")
        );
        assert_eq!(instance.any_broker_addr_of_topic("U"), None);
        let hb = instance.heartbeat_data();
        assert_eq!(hb.client_id, "x@routes");
        assert_eq!(hb.producer_data_set.len(), 1);
    }
}
