//! Start and shutdown of the lite pull consumer.
//!
//! A start checks the group and batch size, gets the shared client instance of its client id,
//! creates the offset store of its message model and the rebalance state, registers the group and
//! starts the instance. Then, in subscribe mode, it fetches the topics' routes and rebalances at
//! once; in assign mode it fetches the assigned topics' routes and starts the assigned queues'
//! pull tasks. A shutdown stops the pull tasks, commits (with auto-commit) and persists the
//! offsets, unregisters the group and stops the instance if it was the last user.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::time::Instant;

use super::{DefaultLitePullConsumer, LiteInner, Runtime, SubscriptionType};
use crate::consumer::pull::{ConsumerOffsets, QueueAccess};
use crate::consumer::rebalance::RebalanceImpl;
use crate::consumer::{MessageModel, MessageQueue};
use crate::error::{ClientError, Result};
use crate::instance::{MQClientManager, MQConsumerInner, ServiceState};

impl DefaultLitePullConsumer {
    /// The lifecycle state (CREATE_JUST, START_FAILED, RUNNING, SHUTDOWN_ALREADY).
    pub fn service_state(&self) -> ServiceState {
        *self.inner.state.lock()
    }

    /// Starts the client instance, the rebalance (subscribe mode) or the assigned queues' pull
    /// tasks (assign mode). A consumer starts once: a second start, or one after a failed start
    /// (left START_FAILED) or after shutdown, fails with [`ClientError::NotStartable`]; a refused
    /// group registration alone returns to CREATE_JUST.
    pub async fn start(&self) -> Result<()> {
        {
            let mut state = self.inner.state.lock();
            if *state != ServiceState::CreateJust {
                return Err(ClientError::NotStartable {
                    service: "LitePullConsumer",
                    state: state.to_string(),
                });
            }
            *state = ServiceState::StartFailed;
        }
        let config = &self.inner.config;
        let group = config.consumer_group.clone();
        if group.is_empty() {
            return Err(ClientError::IllegalArgument(
                "consumer group is empty".to_owned(),
            ));
        }
        if config.pull_batch_size <= 0 {
            return Err(ClientError::IllegalArgument(format!(
                "pull_batch_size {} must be positive",
                config.pull_batch_size
            )));
        }
        let mut client = config.client.clone();
        if config.message_model == MessageModel::Clustering {
            client.change_instance_name_to_pid();
        }
        let instance = MQClientManager::get_or_create_instance(&client);
        let offsets = ConsumerOffsets::create(&instance, &group, config.message_model)?;
        let rebalance = Arc::new(RebalanceImpl::new(
            group.clone(),
            config.message_model,
            Arc::clone(&config.allocate_strategy),
            Arc::clone(&instance),
        ));
        for data in self.inner.subscriptions.read().values() {
            rebalance.put_subscription(data.clone());
        }
        let runtime = Runtime {
            access: QueueAccess::new(Arc::clone(&instance), group.clone()),
            store: Arc::clone(&offsets.store),
            offsets,
            rebalance,
        };
        *self.inner.runtime.write() = Some(runtime.clone());
        let me: Arc<dyn MQConsumerInner> = Arc::clone(&self.inner) as Arc<dyn MQConsumerInner>;
        if let Err(e) = instance.register_consumer(&group, me) {
            *self.inner.runtime.write() = None;
            // As in Java, only a refused registration makes the consumer startable again.
            *self.inner.state.lock() = ServiceState::CreateJust;
            return Err(e);
        }
        if let Err(e) = instance.start().await {
            instance.unregister_consumer(&group);
            *self.inner.runtime.write() = None;
            return Err(e);
        }
        *self.inner.state.lock() = ServiceState::Running;
        *self.inner.last_commit.lock() = Instant::now();
        let sub_type = *self.inner.sub_type.lock();
        match sub_type {
            SubscriptionType::Subscribe => {
                let topics: Vec<String> = self.inner.subscriptions.read().keys().cloned().collect();
                self.inner.refresh_and_rebalance(&runtime, &topics).await;
            }
            SubscriptionType::Assign => {
                let wanted = self.inner.assigned_by_app.read().clone();
                let topics: HashSet<String> = wanted.iter().map(|mq| mq.topic.clone()).collect();
                for topic in topics {
                    if let Err(e) = instance
                        .update_topic_route_info_from_name_server(&topic)
                        .await
                    {
                        tracing::warn!(topic = %topic, error = %e, "route of an assigned topic unavailable");
                    }
                }
                instance.send_heartbeat_to_all_brokers().await;
                self.inner.apply_assignment(&wanted).await;
            }
            SubscriptionType::None => instance.send_heartbeat_to_all_brokers().await,
        }
        if let Some(trace) = &self.inner.trace
            && let Err(e) = trace.start().await
        {
            tracing::warn!(group = %group, error = %e, "message trace not started");
        }
        tracing::info!(group = %group, client_id = %instance.client_id(), "lite pull consumer started");
        Ok(())
    }

    /// Stops the pull tasks, commits (with auto-commit) and persists the offsets, unregisters
    /// the group and stops the instance if it was the last user.
    pub async fn shutdown(&self) {
        {
            let mut state = self.inner.state.lock();
            if *state != ServiceState::Running {
                return;
            }
            *state = ServiceState::ShutdownAlready;
        }
        self.inner.stop.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        let runtime = self.inner.runtime.read().clone();
        let Some(rt) = runtime else { return };
        if self.inner.config.auto_commit {
            self.inner.commit_consumed(&rt);
        }
        rt.rebalance.drop_all();
        let owned: HashSet<MessageQueue> = self.inner.queues.lock().keys().cloned().collect();
        if let Err(e) = rt.offsets.persist_sync(&owned).await {
            tracing::warn!(group = %self.inner.config.consumer_group, error = %e,
                "persisting offsets at shutdown failed");
        }
        let instance = Arc::clone(&rt.access.instance);
        let group = &self.inner.config.consumer_group;
        instance.unregister_consumer(group);
        instance.unregister_client(None, Some(group)).await;
        instance.shutdown().await;
        self.inner.queues.lock().clear();
        self.inner.buffer.lock().clear();
        if let Some(trace) = &self.inner.trace {
            trace.shutdown().await;
        }
    }
}

impl LiteInner {
    pub(super) fn running_runtime(&self) -> Result<Runtime> {
        let state = *self.state.lock();
        if state != ServiceState::Running {
            return Err(ClientError::ServiceState {
                state: state.to_string(),
                needed: ServiceState::Running.to_string(),
            });
        }
        self.runtime
            .read()
            .clone()
            .ok_or_else(|| ClientError::Client("lite pull consumer is not started".to_owned()))
    }
}
