//! The producer and consumer groups registered with a client instance, and their leaving.
//!
//! A group is registered once per instance. A group that leaves is forgotten at once, and its
//! UNREGISTER_CLIENT goes to every known broker when its producer or consumer shuts down, or at
//! the latest when the instance does; a broker also drops the client when its channel closes or
//! expires.

use std::collections::HashSet;
use std::sync::Arc;

use super::{MQClientInstance, MQConsumerInner, MQProducerInner};
use crate::error::{ClientError, Result};

/// Producer/consumer groups that left without their UNREGISTER_CLIENT being sent yet.
#[derive(Default)]
pub(super) struct PendingUnregister {
    producers: HashSet<String>,
    consumers: HashSet<String>,
}

impl MQClientInstance {
    /// Registers a consumer group. A group may be registered once per instance.
    pub fn register_consumer(&self, group: &str, consumer: Arc<dyn MQConsumerInner>) -> Result<()> {
        if group.is_empty() {
            return Err(ClientError::IllegalArgument(
                "consumer group is empty".to_string(),
            ));
        }
        let mut consumers = self.consumers.write();
        if consumers.contains_key(group) {
            return Err(ClientError::DuplicateGroup(group.to_string()));
        }
        consumers.insert(group.to_string(), consumer);
        self.pending_unregister.lock().consumers.remove(group);
        Ok(())
    }

    /// Forgets a consumer group. Its UNREGISTER_CLIENT is sent by [`Self::unregister_client`]
    /// (or at the latest by [`Self::shutdown`]).
    pub fn unregister_consumer(&self, group: &str) {
        if self.consumers.write().remove(group).is_some() {
            self.pending_unregister
                .lock()
                .consumers
                .insert(group.to_string());
        }
    }

    /// Registers a producer group. A group may be registered once per instance.
    pub fn register_producer(&self, group: &str, producer: Arc<dyn MQProducerInner>) -> Result<()> {
        if group.is_empty() {
            return Err(ClientError::IllegalArgument(
                "producer group is empty".to_string(),
            ));
        }
        let mut producers = self.producers.write();
        if producers.contains_key(group) {
            return Err(ClientError::DuplicateGroup(group.to_string()));
        }
        producers.insert(group.to_string(), producer);
        self.pending_unregister.lock().producers.remove(group);
        Ok(())
    }

    /// Forgets a producer group (see [`Self::unregister_consumer`]).
    pub fn unregister_producer(&self, group: &str) {
        if self.producers.write().remove(group).is_some() {
            self.pending_unregister
                .lock()
                .producers
                .insert(group.to_string());
        }
    }

    /// The consumer registered for `group`, if any.
    pub fn consumer(&self, group: &str) -> Option<Arc<dyn MQConsumerInner>> {
        self.consumers.read().get(group).cloned()
    }

    /// The producer registered for `group`, if any.
    pub fn producer(&self, group: &str) -> Option<Arc<dyn MQProducerInner>> {
        self.producers.read().get(group).cloned()
    }

    /// Sends UNREGISTER_CLIENT for the given groups to every known broker. Failures are logged:
    /// a broker also drops the client when its channel closes or expires.
    pub async fn unregister_client(
        &self,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
    ) {
        {
            let mut pending = self.pending_unregister.lock();
            if let Some(g) = producer_group {
                pending.producers.remove(g);
            }
            if let Some(g) = consumer_group {
                pending.consumers.remove(g);
            }
        }
        let timeout = self.config.mq_client_api_timeout;
        for addr in self.all_broker_addrs() {
            if let Err(e) = self
                .api
                .unregister_client(
                    &addr,
                    &self.client_id,
                    producer_group,
                    consumer_group,
                    timeout,
                )
                .await
            {
                tracing::warn!(broker = %addr, error = %e, ?producer_group, ?consumer_group, "unregister client failed");
            }
        }
    }

    pub(super) async fn flush_pending_unregister(&self) {
        let pending = std::mem::take(&mut *self.pending_unregister.lock());
        for group in &pending.producers {
            self.unregister_client(Some(group), None).await;
        }
        for group in &pending.consumers {
            self.unregister_client(None, Some(group)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::super::test_support::{CountingProducer, config};
    use super::*;

    #[test]
    fn duplicate_group_is_refused() {
        let instance = MQClientInstance::new(config("dup"), "x@dup".to_string());
        let producer = Arc::new(CountingProducer {
            updates: AtomicUsize::new(0),
        });
        instance
            .register_producer("g", producer.clone())
            .expect("first registration");
        let err = instance
            .register_producer("g", producer.clone())
            .expect_err("second registration");
        assert!(matches!(&err, ClientError::DuplicateGroup(g) if g == "g"));
        assert!(err.to_string().contains("already registered"));
        instance.unregister_producer("g");
        instance
            .register_producer("g", producer)
            .expect("registration after unregister");
    }
}
