//! `RebalanceImpl`: which queues this member of a consumer group reads, and the per-queue state
//! that follows from it.
//!
//! Every member recomputes its share on its own — every 20 s, and at once when a broker says the
//! group's membership changed (NOTIFY_CONSUMER_IDS_CHANGED) — from the topic's queues and the
//! group's client ids, both sorted (the queues by topic, broker name and queue id, the ids as
//! strings), with the same [`AllocateMessageQueueStrategy`]. Because members see membership changes
//! at slightly different moments, two members may briefly both own a queue; clustering consumption
//! is at-least-once for that reason, and orderly consumption locks queues on the broker before
//! pulling.
//!
//! The outcome is the *process-queue table*: one [`ProcessQueue`] per owned queue. Queues no longer
//! owned are marked dropped (their pulls and consume tasks stop), their offsets persisted and
//! forgotten, and, for orderly consumers, unlocked; new queues get a start offset (the stored one,
//! or where ConsumeFromWhere says when the broker has none) and a [`PullRequest`] that starts their
//! pull loop. What differs between consumer kinds is delegated to a [`RebalanceDelegate`].

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use comet_protocol::body::route::MASTER_ID;
use comet_protocol::body::{LockBatchRequestBody, UnlockBatchRequestBody};
use futures::future::BoxFuture;
use parking_lot::RwLock;

use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::{
    ConsumeType, MessageModel, MessageQueue, SubscriptionData, is_retry_topic, now_millis,
};
use crate::error::ClientError;
use crate::instance::MQClientInstance;

pub mod allocate;
pub mod machine_room;

/// Kept at its former path; the type lives in [`crate::consumer::pull_request`].
pub use crate::consumer::pull_request::PullRequest;
pub use allocate::{
    AllocateError, AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig, AllocateMessageQueueConsistentHash, AllocateMessageQueueStrategy,
};
pub use machine_room::{
    AllocateMachineRoomNearby, AllocateMessageQueueByMachineRoom, MachineRoomResolver,
};

/// What a consumer kind adds to the shared rebalance algorithm.
pub trait RebalanceDelegate: Send + Sync {
    /// Whether the consumer kind pulls actively (pull, lite) or passively (push).
    fn consume_type(&self) -> ConsumeType;

    /// The owned set of `topic` changed (e.g. send a heartbeat so the broker learns it sooner).
    fn message_queue_changed<'a>(
        &'a self,
        topic: &'a str,
        mq_all: &'a HashSet<MessageQueue>,
        mq_divided: &'a HashSet<MessageQueue>,
    ) -> BoxFuture<'a, ()>;

    /// Gives up `mq`; `false` keeps it in the table for another try (orderly consumption still
    /// running).
    fn remove_unnecessary_message_queue<'a>(
        &'a self,
        mq: &'a MessageQueue,
        pq: &'a Arc<ProcessQueue>,
    ) -> BoxFuture<'a, bool>;

    /// Forgets any in-memory offset of a queue about to be (re)started.
    fn remove_dirty_offset(&self, mq: &MessageQueue);

    /// The start offset of a newly owned queue: the stored one, or where ConsumeFromWhere says
    /// when the broker has none. `Err` skips the queue until the next rebalance.
    fn compute_pull_from_where<'a>(
        &'a self,
        mq: &'a MessageQueue,
    ) -> BoxFuture<'a, Result<i64, ClientError>>;

    /// Starts the pull loops of newly owned queues.
    fn dispatch_pull_request(&self, requests: Vec<PullRequest>) -> BoxFuture<'_, ()>;
    /// How long an owned queue may go unpulled before rebalance drops and re-creates it.
    fn pull_max_idle(&self) -> std::time::Duration {
        crate::consumer::process_queue::PULL_MAX_IDLE_TIME
    }
}

/// Java's `MessageQueue.compareTo`: topic, then broker name, then queue id.
pub fn java_queue_order(a: &MessageQueue, b: &MessageQueue) -> Ordering {
    a.topic
        .cmp(&b.topic)
        .then_with(|| a.broker_name.cmp(&b.broker_name))
        .then_with(|| a.queue_id.cmp(&b.queue_id))
}

/// The rebalance state of one consumer group in one client.
pub struct RebalanceImpl {
    consumer_group: String,
    message_model: MessageModel,
    strategy: Arc<dyn AllocateMessageQueueStrategy>,
    instance: Arc<MQClientInstance>,
    subscription_inner: RwLock<HashMap<String, SubscriptionData>>,
    topic_subscribe_info_table: RwLock<HashMap<String, HashSet<MessageQueue>>>,
    process_queue_table: RwLock<HashMap<MessageQueue, Arc<ProcessQueue>>>,
    /// Serialises rebalance runs (the periodic service and a notification may overlap).
    run_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for RebalanceImpl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RebalanceImpl")
            .field("consumer_group", &self.consumer_group)
            .field("message_model", &self.message_model)
            .field("strategy", &self.strategy.name())
            .finish_non_exhaustive()
    }
}

impl RebalanceImpl {
    /// The rebalance state of `consumer_group`.
    pub fn new(
        consumer_group: String,
        message_model: MessageModel,
        strategy: Arc<dyn AllocateMessageQueueStrategy>,
        instance: Arc<MQClientInstance>,
    ) -> Self {
        RebalanceImpl {
            consumer_group,
            message_model,
            strategy,
            instance,
            subscription_inner: RwLock::new(HashMap::new()),
            topic_subscribe_info_table: RwLock::new(HashMap::new()),
            process_queue_table: RwLock::new(HashMap::new()),
            run_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The consumer group.
    pub fn consumer_group(&self) -> &str {
        &self.consumer_group
    }

    /// The group's message model.
    pub fn message_model(&self) -> MessageModel {
        self.message_model
    }

    /// The allocation strategy.
    pub fn strategy(&self) -> &Arc<dyn AllocateMessageQueueStrategy> {
        &self.strategy
    }

    /// The client instance the group is registered with.
    pub fn instance(&self) -> &Arc<MQClientInstance> {
        &self.instance
    }

    // ---- subscriptions and subscribe info -------------------------------------------------

    /// Adds or replaces the subscription of a topic.
    pub fn put_subscription(&self, data: SubscriptionData) {
        self.subscription_inner
            .write()
            .insert(data.topic.clone(), data);
    }

    /// Drops the subscription of `topic`.
    pub fn remove_subscription(&self, topic: &str) {
        self.subscription_inner.write().remove(topic);
    }

    /// The subscription of `topic`, if any.
    pub fn subscription(&self, topic: &str) -> Option<SubscriptionData> {
        self.subscription_inner.read().get(topic).cloned()
    }

    /// Every subscription.
    pub fn subscriptions(&self) -> Vec<SubscriptionData> {
        let mut subs: Vec<_> = self.subscription_inner.read().values().cloned().collect();
        subs.sort_by(|a, b| a.topic.cmp(&b.topic));
        subs
    }

    /// Records the readable queues of `topic` (from its route).
    pub fn set_topic_subscribe_info(&self, topic: &str, info: Vec<MessageQueue>) {
        if self.subscription_inner.read().contains_key(topic) {
            self.topic_subscribe_info_table
                .write()
                .insert(topic.to_owned(), info.into_iter().collect());
        }
    }

    /// The readable queues of `topic`, if its route is known.
    pub fn topic_subscribe_info(&self, topic: &str) -> Option<HashSet<MessageQueue>> {
        self.topic_subscribe_info_table.read().get(topic).cloned()
    }

    /// Whether a subscribed topic has no subscribe info yet.
    pub fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.subscription_inner.read().contains_key(topic)
            && !self.topic_subscribe_info_table.read().contains_key(topic)
    }

    // ---- the process-queue table ------------------------------------------------------------

    /// The process queue of an owned queue.
    pub fn process_queue(&self, mq: &MessageQueue) -> Option<Arc<ProcessQueue>> {
        self.process_queue_table.read().get(mq).cloned()
    }

    /// Every owned queue with its process queue.
    pub fn process_queue_table(&self) -> Vec<(MessageQueue, Arc<ProcessQueue>)> {
        self.process_queue_table
            .read()
            .iter()
            .map(|(mq, pq)| (mq.clone(), Arc::clone(pq)))
            .collect()
    }

    /// Queues currently owned.
    pub fn owned_queues(&self) -> HashSet<MessageQueue> {
        self.process_queue_table.read().keys().cloned().collect()
    }

    /// Drops the queue's state (it will be recreated by the next rebalance if still owned).
    pub async fn remove_process_queue(&self, delegate: &dyn RebalanceDelegate, mq: &MessageQueue) {
        let removed = self.process_queue_table.write().remove(mq);
        if let Some(pq) = removed {
            let dropped_before = pq.is_dropped();
            pq.set_dropped(true);
            delegate.remove_unnecessary_message_queue(mq, &pq).await;
            tracing::info!(group = %self.consumer_group, %mq, dropped_before,
                "process queue removed");
        }
    }

    /// Drops every queue (shutdown).
    pub fn drop_all(&self) {
        for pq in self.process_queue_table.read().values() {
            pq.set_dropped(true);
        }
    }

    // ---- rebalance --------------------------------------------------------------------------

    /// One rebalance of every subscribed topic.
    pub async fn do_rebalance(&self, delegate: &dyn RebalanceDelegate, is_order: bool) {
        let _guard = self.run_lock.lock().await;
        let topics: Vec<String> = self.subscription_inner.read().keys().cloned().collect();
        for topic in &topics {
            if let Err(e) = self.rebalance_by_topic(delegate, topic, is_order).await
                && !is_retry_topic(topic)
            {
                tracing::warn!(group = %self.consumer_group, topic = %topic, error = %e,
                    "rebalance failed");
            }
        }
        self.truncate_message_queue_not_my_topic(delegate).await;
    }

    async fn rebalance_by_topic(
        &self,
        delegate: &dyn RebalanceDelegate,
        topic: &str,
        is_order: bool,
    ) -> Result<(), ClientError> {
        let Some(mq_set) = self.topic_subscribe_info(topic) else {
            if !is_retry_topic(topic) {
                tracing::warn!(group = %self.consumer_group, topic,
                    "doRebalance: no subscribe info for the topic yet");
            }
            return Ok(());
        };
        match self.message_model {
            MessageModel::Broadcasting => {
                let changed = self
                    .update_process_queue_table_in_rebalance(delegate, topic, &mq_set, is_order)
                    .await;
                if changed {
                    delegate
                        .message_queue_changed(topic, &mq_set, &mq_set)
                        .await;
                }
            }
            MessageModel::Clustering => {
                let mut cid_all = self
                    .instance
                    .find_consumer_id_list(topic, &self.consumer_group)
                    .await?;
                if cid_all.is_empty() {
                    tracing::warn!(group = %self.consumer_group, topic,
                        "doRebalance: the broker knows no consumer of the group yet");
                    return Ok(());
                }
                cid_all.sort();
                cid_all.dedup();
                let mut mq_all: Vec<MessageQueue> = mq_set.iter().cloned().collect();
                mq_all.sort_by(java_queue_order);
                let allocated = match self.strategy.try_allocate(
                    &self.consumer_group,
                    self.instance.client_id(),
                    &mq_all,
                    &cid_all,
                ) {
                    Ok(allocated) => allocated,
                    Err(e) => {
                        // The topic keeps the queues it has until the strategy can decide.
                        tracing::error!(group = %self.consumer_group, topic,
                            strategy = self.strategy.name(), error = %e,
                            "allocate message queue failed");
                        return Ok(());
                    }
                };
                let allocated: HashSet<MessageQueue> = allocated.into_iter().collect();
                let changed = self
                    .update_process_queue_table_in_rebalance(delegate, topic, &allocated, is_order)
                    .await;
                if changed {
                    tracing::info!(group = %self.consumer_group, topic,
                        client_id = %self.instance.client_id(),
                        queues = allocated.len(), consumers = cid_all.len(),
                        "rebalance result changed");
                    delegate
                        .message_queue_changed(topic, &mq_set, &allocated)
                        .await;
                }
            }
        }
        Ok(())
    }

    /// Applies a new owned set for `topic`; returns whether the table changed.
    async fn update_process_queue_table_in_rebalance(
        &self,
        delegate: &dyn RebalanceDelegate,
        topic: &str,
        mq_set: &HashSet<MessageQueue>,
        is_order: bool,
    ) -> bool {
        let mut changed = false;
        for (mq, pq) in self.process_queue_table() {
            if mq.topic != topic {
                continue;
            }
            let give_up = if !mq_set.contains(&mq) {
                true
            } else if pq.is_pull_expired_after(delegate.pull_max_idle())
                && delegate.consume_type() == ConsumeType::ConsumePassively
            {
                tracing::warn!(group = %self.consumer_group, %mq,
                    "pull expired: nobody pulled the queue for too long, dropping it");
                true
            } else {
                false
            };
            if give_up {
                pq.set_dropped(true);
                if delegate.remove_unnecessary_message_queue(&mq, &pq).await {
                    self.process_queue_table.write().remove(&mq);
                    changed = true;
                    tracing::info!(group = %self.consumer_group, %mq,
                        "queue given up by rebalance");
                }
            }
        }

        let mut new_queues: Vec<&MessageQueue> = mq_set
            .iter()
            .filter(|mq| !self.process_queue_table.read().contains_key(*mq))
            .collect();
        new_queues.sort_by(|a, b| java_queue_order(a, b));
        let mut requests = Vec::new();
        for mq in new_queues {
            if is_order && !self.lock(mq).await {
                tracing::warn!(group = %self.consumer_group, %mq,
                    "rebalance: new queue not locked by the broker, will retry");
                continue;
            }
            delegate.remove_dirty_offset(mq);
            let next_offset = match delegate.compute_pull_from_where(mq).await {
                Ok(offset) => offset,
                Err(e) => {
                    tracing::warn!(group = %self.consumer_group, %mq, error = %e,
                        "rebalance: cannot compute the start offset");
                    continue;
                }
            };
            if next_offset < 0 {
                continue;
            }
            let pq = Arc::new(ProcessQueue::new());
            if is_order {
                // The lock above just succeeded.
                pq.set_locked(true);
                pq.set_last_lock_timestamp(now_millis());
            }
            let inserted = {
                let mut table = self.process_queue_table.write();
                if table.contains_key(mq) {
                    false
                } else {
                    table.insert(mq.clone(), Arc::clone(&pq));
                    true
                }
            };
            if inserted {
                tracing::info!(group = %self.consumer_group, %mq, next_offset,
                    "rebalance: new queue");
                requests.push(PullRequest {
                    consumer_group: self.consumer_group.clone(),
                    message_queue: mq.clone(),
                    process_queue: pq,
                    next_offset,
                    previously_locked: false,
                });
                changed = true;
            }
        }
        if !requests.is_empty() {
            delegate.dispatch_pull_request(requests).await;
        }
        changed
    }

    /// Drops the queues of topics no longer subscribed.
    async fn truncate_message_queue_not_my_topic(&self, delegate: &dyn RebalanceDelegate) {
        let subscribed: HashSet<String> = self.subscription_inner.read().keys().cloned().collect();
        for (mq, _) in self.process_queue_table() {
            if !subscribed.contains(&mq.topic) {
                self.remove_process_queue(delegate, &mq).await;
            }
        }
    }

    // ---- broker locks (orderly) -------------------------------------------------------------

    fn master_addr(&self, broker_name: &str) -> Option<String> {
        self.instance
            .find_broker_address_in_subscribe(broker_name, MASTER_ID, true)
            .map(|r| r.broker_addr)
    }

    fn lock_body(&self, mqs: Vec<MessageQueue>) -> LockBatchRequestBody {
        LockBatchRequestBody {
            consumer_group: self.consumer_group.clone(),
            client_id: self.instance.client_id().to_owned(),
            mq_set: mqs.into_iter().collect(),
            only_this_broker: false,
        }
    }

    /// Locks one queue on its broker; on success marks its process queue locked.
    pub async fn lock(&self, mq: &MessageQueue) -> bool {
        let Some(addr) = self.master_addr(&mq.broker_name) else {
            return false;
        };
        let timeout = self.instance.config().mq_client_api_timeout;
        match self
            .instance
            .api()
            .lock_batch_mq(&addr, self.lock_body(vec![mq.clone()]), timeout)
            .await
        {
            Ok(locked) => {
                let now = now_millis();
                for locked_mq in &locked {
                    if let Some(pq) = self.process_queue(locked_mq) {
                        pq.set_locked(true);
                        pq.set_last_lock_timestamp(now);
                    }
                }
                locked.contains(mq)
            }
            Err(e) => {
                tracing::warn!(group = %self.consumer_group, %mq, error = %e, "lockBatchMQ failed");
                false
            }
        }
    }

    /// Re-locks every owned queue, broker by broker (every 20 s for orderly consumers); queues
    /// the broker refuses are marked unlocked so their consumption pauses.
    pub async fn lock_all(&self) {
        for (broker_name, mqs) in self.queues_by_broker() {
            let Some(addr) = self.master_addr(&broker_name) else {
                continue;
            };
            let timeout = self.instance.config().mq_client_api_timeout;
            match self
                .instance
                .api()
                .lock_batch_mq(&addr, self.lock_body(mqs.clone()), timeout)
                .await
            {
                Ok(locked) => {
                    let now = now_millis();
                    for mq in &mqs {
                        if let Some(pq) = self.process_queue(mq) {
                            if locked.contains(mq) {
                                if !pq.is_locked() {
                                    tracing::info!(group = %self.consumer_group, %mq,
                                        "queue locked");
                                }
                                pq.set_locked(true);
                                pq.set_last_lock_timestamp(now);
                            } else {
                                pq.set_locked(false);
                                tracing::info!(group = %self.consumer_group, %mq,
                                    "queue lock refused by the broker");
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(group = %self.consumer_group, broker = %broker_name,
                    error = %e, "lockBatchMQ failed"),
            }
        }
    }

    /// Unlocks one queue on its broker.
    pub async fn unlock(&self, mq: &MessageQueue, oneway: bool) {
        let Some(addr) = self.master_addr(&mq.broker_name) else {
            return;
        };
        let body = UnlockBatchRequestBody {
            consumer_group: self.consumer_group.clone(),
            client_id: self.instance.client_id().to_owned(),
            mq_set: std::iter::once(mq.clone()).collect(),
            only_this_broker: false,
        };
        let timeout = self.instance.config().mq_client_api_timeout;
        if let Err(e) = self
            .instance
            .api()
            .unlock_batch_mq(&addr, body, timeout, oneway)
            .await
        {
            tracing::warn!(group = %self.consumer_group, %mq, error = %e, "unlockBatchMQ failed");
        }
    }

    /// Unlocks every owned queue (shutdown of an orderly consumer).
    pub async fn unlock_all(&self, oneway: bool) {
        for (broker_name, mqs) in self.queues_by_broker() {
            let Some(addr) = self.master_addr(&broker_name) else {
                continue;
            };
            let body = UnlockBatchRequestBody {
                consumer_group: self.consumer_group.clone(),
                client_id: self.instance.client_id().to_owned(),
                mq_set: mqs.iter().cloned().collect(),
                only_this_broker: false,
            };
            let timeout = self.instance.config().mq_client_api_timeout;
            match self
                .instance
                .api()
                .unlock_batch_mq(&addr, body, timeout, oneway)
                .await
            {
                Ok(()) => {
                    for mq in &mqs {
                        if let Some(pq) = self.process_queue(mq) {
                            pq.set_locked(false);
                        }
                    }
                }
                Err(e) => tracing::warn!(group = %self.consumer_group, broker = %broker_name,
                    error = %e, "unlockBatchMQ failed"),
            }
        }
    }

    fn queues_by_broker(&self) -> HashMap<String, Vec<MessageQueue>> {
        let mut by_broker: HashMap<String, Vec<MessageQueue>> = HashMap::new();
        for mq in self.process_queue_table.read().keys() {
            by_broker
                .entry(mq.broker_name.clone())
                .or_default()
                .push(mq.clone());
        }
        for mqs in by_broker.values_mut() {
            mqs.sort_by(java_queue_order);
        }
        by_broker
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_sort_like_java() {
        let mut mqs = [
            MessageQueue::new("B", "a", 0),
            MessageQueue::new("A", "b", 0),
            MessageQueue::new("A", "a", 10),
            MessageQueue::new("A", "a", 2),
        ];
        mqs.sort_by(java_queue_order);
        let keys: Vec<_> = mqs
            .iter()
            .map(|m| format!("{}/{}/{}", m.topic, m.broker_name, m.queue_id))
            .collect();
        assert_eq!(keys, vec!["A/a/2", "A/a/10", "A/b/0", "B/a/0"]);
    }
}
