//! Which queues the lite pull consumer owns, and their pull tasks.
//!
//! Queues come either from the group's rebalance (subscribe mode: the shared [`RebalanceImpl`]
//! and allocation strategies, so lite and push members of one group share queues correctly) or
//! from the application (assign mode); the two modes exclude each other, as in RocketMQ. Owning a
//! queue means one entry in the queue table and one pull task; giving it up stops the task, drops
//! what is buffered of it and commits (with auto-commit) and persists its offset.
//!
//! [`RebalanceImpl`]: crate::consumer::rebalance::RebalanceImpl

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::Notify;

use super::{DefaultLitePullConsumer, LiteInner, QueueState, Runtime, SubscriptionType};
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::pull_request::PullRequest;
use crate::consumer::rebalance::RebalanceDelegate;
use crate::consumer::{ConsumeType, MessageQueue, SubscriptionData, now_millis};
use crate::error::{ClientError, Result};

impl DefaultLitePullConsumer {
    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`); queues come from the
    /// group's rebalance. Excludes [`Self::assign`]. May be called before or after start.
    pub async fn subscribe(&self, topic: &str, sub_expression: &str) -> Result<()> {
        if topic.is_empty() {
            return Err(ClientError::IllegalArgument("topic is empty".to_owned()));
        }
        self.inner.set_sub_type(SubscriptionType::Subscribe)?;
        let data = SubscriptionData::from_tag_expression(topic, sub_expression, now_millis());
        self.inner
            .subscriptions
            .write()
            .insert(topic.to_owned(), data.clone());
        let runtime = self.inner.runtime.read().clone();
        if let Some(rt) = runtime {
            rt.rebalance.put_subscription(data);
            self.inner
                .refresh_and_rebalance(&rt, &[topic.to_owned()])
                .await;
        }
        Ok(())
    }

    /// Stops reading `topic` (subscribe mode).
    pub async fn unsubscribe(&self, topic: &str) {
        self.inner.subscriptions.write().remove(topic);
        let runtime = self.inner.runtime.read().clone();
        if let Some(rt) = runtime {
            rt.rebalance.remove_subscription(topic);
            rt.rebalance.do_rebalance(&*self.inner, false).await;
        }
        let gone: Vec<MessageQueue> = self
            .inner
            .queues
            .lock()
            .keys()
            .filter(|mq| mq.topic == topic)
            .cloned()
            .collect();
        for mq in gone {
            self.inner.remove_queue(&mq).await;
        }
    }

    /// Reads exactly `queues` (no rebalance). Excludes [`Self::subscribe`]. Replaces the previous
    /// assignment; queues no longer assigned stop and their offsets are persisted.
    pub async fn assign(&self, queues: Vec<MessageQueue>) -> Result<()> {
        if queues.is_empty() {
            return Err(ClientError::IllegalArgument(
                "the message queue list to assign is empty".to_owned(),
            ));
        }
        self.inner.set_sub_type(SubscriptionType::Assign)?;
        let wanted: HashSet<MessageQueue> = queues.into_iter().collect();
        *self.inner.assigned_by_app.write() = wanted.clone();
        if self.inner.runtime.read().is_some() {
            self.inner.apply_assignment(&wanted).await;
        }
        Ok(())
    }

    /// The queues currently owned (assigned or allocated), sorted.
    pub fn assignment(&self) -> Vec<MessageQueue> {
        let mut owned: Vec<MessageQueue> = self.inner.queues.lock().keys().cloned().collect();
        owned.sort();
        owned
    }

    /// The readable queues of `topic`, from the name server.
    pub async fn fetch_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        self.inner
            .running_runtime()?
            .access
            .fetch_subscribe_message_queues(topic)
            .await
    }
}

impl LiteInner {
    fn set_sub_type(&self, wanted: SubscriptionType) -> Result<()> {
        let mut current = self.sub_type.lock();
        match *current {
            SubscriptionType::None => {
                *current = wanted;
                Ok(())
            }
            t if t == wanted => Ok(()),
            _ => Err(ClientError::IllegalArgument(
                "subscribe and assign are mutually exclusive".to_owned(),
            )),
        }
    }

    /// Fetches the routes of `topics`, announces the subscriptions and rebalances once now.
    pub(super) async fn refresh_and_rebalance(&self, rt: &Runtime, topics: &[String]) {
        let instance = &rt.access.instance;
        for topic in topics {
            match instance
                .update_topic_route_info_from_name_server(topic)
                .await
            {
                Ok(_) => {
                    if let Some(route) = instance.topic_route(topic) {
                        rt.rebalance.set_topic_subscribe_info(
                            topic,
                            crate::route::subscribe_queues(topic, &route),
                        );
                    }
                }
                Err(e) => {
                    tracing::warn!(topic = %topic, error = %e, "route of a subscribed topic unavailable")
                }
            }
        }
        instance.send_heartbeat_to_all_brokers().await;
        rt.rebalance.do_rebalance(self, false).await;
        instance.rebalance_immediately();
    }

    /// Assign mode: starts the queues in `wanted` that are not owned, stops the others.
    pub(super) async fn apply_assignment(&self, wanted: &HashSet<MessageQueue>) {
        let owned: Vec<MessageQueue> = self.queues.lock().keys().cloned().collect();
        for mq in owned.iter().filter(|mq| !wanted.contains(*mq)) {
            self.remove_queue(mq).await;
        }
        for mq in wanted {
            self.add_queue(mq.clone(), None);
        }
    }

    /// Starts owning `mq` (no-op when owned): registers its state and spawns its pull task.
    fn add_queue(&self, mq: MessageQueue, start_offset: Option<i64>) {
        let Some(me) = self.me.upgrade() else { return };
        let wake = Arc::new(Notify::new());
        let cancel = self.stop.child_token();
        {
            let mut queues = self.queues.lock();
            if queues.contains_key(&mq) {
                return;
            }
            queues.insert(
                mq.clone(),
                QueueState {
                    epoch: 0,
                    pull_offset: start_offset,
                    consume_offset: start_offset.unwrap_or(-1),
                    cached_msgs: 0,
                    cached_bytes: 0,
                    wake: Arc::clone(&wake),
                    cancel: cancel.clone(),
                },
            );
        }
        tracing::info!(group = %self.config.consumer_group, %mq, ?start_offset, "lite pull: queue started");
        self.tasks
            .spawn(async move { me.pull_loop(mq, wake, cancel).await });
    }

    /// Stops owning `mq`: stops its task, drops its buffered messages, commits (with
    /// auto-commit) and persists its offset.
    async fn remove_queue(&self, mq: &MessageQueue) {
        let removed = self.queues.lock().remove(mq);
        let Some(state) = removed else { return };
        state.cancel.cancel();
        self.drop_buffered(mq);
        let runtime = self.runtime.read().clone();
        if let Some(rt) = runtime {
            if self.config.auto_commit && state.consume_offset >= 0 {
                rt.store.update_offset(mq, state.consume_offset, false);
            }
            if let Err(e) = rt.offsets.persist_sync(&HashSet::from([mq.clone()])).await {
                tracing::warn!(%mq, error = %e, "persisting the offset of a released queue failed");
            }
            rt.store.remove_offset(mq);
        }
        tracing::info!(group = %self.config.consumer_group, %mq, "lite pull: queue stopped");
    }
}

impl RebalanceDelegate for LiteInner {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumeActively
    }

    fn message_queue_changed<'a>(
        &'a self,
        _topic: &'a str,
        _mq_all: &'a HashSet<MessageQueue>,
        _mq_divided: &'a HashSet<MessageQueue>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn remove_unnecessary_message_queue<'a>(
        &'a self,
        mq: &'a MessageQueue,
        _pq: &'a Arc<ProcessQueue>,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            self.remove_queue(mq).await;
            true
        })
    }

    fn remove_dirty_offset(&self, mq: &MessageQueue) {
        if let Some(rt) = self.runtime.read().as_ref() {
            rt.store.remove_offset(mq);
        }
    }

    fn compute_pull_from_where<'a>(
        &'a self,
        mq: &'a MessageQueue,
    ) -> BoxFuture<'a, Result<i64, ClientError>> {
        Box::pin(async move {
            let rt = self.runtime.read().clone().ok_or_else(|| {
                ClientError::Client("lite pull consumer is not started".to_owned())
            })?;
            self.compute_start_offset(&rt, mq).await
        })
    }

    fn dispatch_pull_request(&self, requests: Vec<PullRequest>) -> BoxFuture<'_, ()> {
        for request in requests {
            self.add_queue(request.message_queue, Some(request.next_offset));
        }
        Box::pin(async {})
    }
}
