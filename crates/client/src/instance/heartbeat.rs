//! The heartbeat of a client instance: HEART_BEAT to every broker, describing every registered
//! producer group and consumer group (with its subscriptions), which is how a broker learns group
//! membership. Its answer carries the broker's version, kept for the broker lookups.

use comet_protocol::body::route::MASTER_ID;
use comet_protocol::body::{ConsumerData, HeartbeatData, ProducerData};

use super::MQClientInstance;

impl MQClientInstance {
    /// The version a broker announced in its last heartbeat response.
    pub fn broker_version(&self, addr: &str) -> Option<i32> {
        self.broker_versions.read().get(addr).copied()
    }

    /// The HEART_BEAT body describing every registered group.
    pub fn heartbeat_data(&self) -> HeartbeatData {
        let mut producer_data_set: Vec<ProducerData> = self
            .producers
            .read()
            .keys()
            .map(|g| ProducerData {
                group_name: g.clone(),
            })
            .collect();
        producer_data_set.sort_by(|a, b| a.group_name.cmp(&b.group_name));
        let mut consumer_data_set: Vec<ConsumerData> = self
            .consumers
            .read()
            .iter()
            .map(|(group, c)| ConsumerData {
                group_name: group.clone(),
                consume_type: c.consume_type(),
                message_model: c.message_model(),
                consume_from_where: c.consume_from_where(),
                subscription_data_set: c.subscriptions(),
                unit_mode: c.unit_mode(),
            })
            .collect();
        consumer_data_set.sort_by(|a, b| a.group_name.cmp(&b.group_name));
        HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set,
            consumer_data_set,
            ..Default::default()
        }
    }

    /// Sends the heartbeat to every master broker (and, when consumers are registered, to the
    /// slaves too, which consumers may pull from). Records each broker's version.
    pub async fn send_heartbeat_to_all_brokers(&self) {
        let _guard = self.heartbeat_lock.lock().await;
        let heartbeat = self.heartbeat_data();
        if heartbeat.producer_data_set.is_empty() && heartbeat.consumer_data_set.is_empty() {
            return;
        }
        let with_slaves = !heartbeat.consumer_data_set.is_empty();
        let targets: Vec<String> = self
            .broker_addrs
            .read()
            .values()
            .flat_map(|ids| {
                ids.iter()
                    .filter(|(id, _)| with_slaves || **id == MASTER_ID)
                    .map(|(_, addr)| addr.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        let timeout = self.config.mq_client_api_timeout;
        for addr in targets {
            match self.api.send_heartbeat(&addr, &heartbeat, timeout).await {
                Ok(version) => {
                    self.broker_versions.write().insert(addr, version);
                }
                Err(e) => tracing::warn!(broker = %addr, error = %e, "heartbeat failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use comet_protocol::body::ConsumeFromWhere;

    use super::super::test_support::{RecordingConsumer, config};
    use super::*;

    #[test]
    fn heartbeat_lists_consumers_with_subscriptions() {
        let instance = MQClientInstance::new(config("hb"), "x@hb".to_string());
        let consumer = Arc::new(RecordingConsumer::default());
        instance
            .register_consumer("cg", consumer)
            .expect("registers");
        let hb = instance.heartbeat_data();
        let [data] = hb.consumer_data_set.as_slice() else {
            panic!("one consumer group expected");
        };
        assert_eq!(data.group_name, "cg");
        assert_eq!(
            data.consume_from_where,
            ConsumeFromWhere::ConsumeFromFirstOffset
        );
        assert_eq!(data.subscription_data_set[0].tags_set, vec!["TagA"]);
        assert!(hb.producer_data_set.is_empty());
    }
}
