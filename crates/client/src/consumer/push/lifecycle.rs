//! Start and shutdown of a push consumer (Java `DefaultMQPushConsumerImpl.start` and
//! `shutdown`).
//!
//! A start checks the configuration and the listener, registers the subscriptions (in clustering
//! also the group's retry topic `%RETRY%<group>`, which failed messages come back through), gets
//! the shared [`MQClientInstance`](crate::instance::MQClientInstance) of its client id, creates the
//! rebalance state, the offset store of its message model (broker for clustering, local file for
//! broadcasting) and the consume service its listener asks for, registers the group with the
//! instance and starts the instance, which runs route refresh, heartbeats, offset persistence and
//! the rebalance service for every consumer of the process. It then fetches the subscribed topics'
//! routes, lets brokers check subscriptions that are not tag expressions, sends a heartbeat and
//! rebalances at once, so the first pulls do not wait for the periodic rebalance.
//!
//! The lifecycle follows the Java service states: CREATE_JUST → START_FAILED (while starting) →
//! RUNNING → SHUTDOWN_ALREADY. As in Java, only CREATE_JUST may start: a start in any other state
//! fails with [`ClientError::NotStartable`]. A start refused by the configuration check or by
//! a later step stays START_FAILED (build a new consumer to try again); only a refused group
//! registration (the group already runs in this client instance) returns to CREATE_JUST.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use comet_protocol::code::RequestCode;
use parking_lot::Mutex;
use serde::Serialize;

use super::{
    ConsumeMessageConcurrentlyService, ConsumeMessageOrderlyService, ConsumeService,
    PullMessageService, PushConsumerConfig, PushConsumerInner, Runtime,
};
use crate::consumer::offset_store::{
    LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore, default_local_offset_store_dir,
};
use crate::consumer::rebalance::RebalanceImpl;
use crate::consumer::{MessageListener, MessageModel, SubscriptionData, now_millis, retry_topic};
use crate::error::ClientError;
use crate::instance::{MQClientInstance, MQClientManager, MQConsumerInner, ServiceState};

/// Body of CHECK_CLIENT_CONFIG.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CheckClientRequestBody<'a> {
    client_id: &'a str,
    group: &'a str,
    subscription_data: &'a SubscriptionData,
}

impl PushConsumerInner {
    /// Starts the consumer (see [`super::DefaultMQPushConsumer::start`]). START_FAILED marks a
    /// start in progress and stays after a failed one, so any second start is refused; a failed
    /// start stops what it spawned. A refused group registration alone returns to CREATE_JUST,
    /// as in Java, since nothing about the consumer itself was wrong.
    pub(super) async fn start(&self) -> Result<(), ClientError> {
        {
            let mut state = self.state.lock();
            if *state != ServiceState::CreateJust {
                return Err(ClientError::NotStartable {
                    service: "PushConsumer",
                    state: state.to_string(),
                });
            }
            *state = ServiceState::StartFailed;
        }
        match self.start_inner().await {
            Ok(()) => Ok(()),
            Err(e) => {
                let rt = self.runtime.write().take();
                if let Some(rt) = rt {
                    rt.stop.cancel();
                    rt.consume_service_shutdown_now();
                    // Stops the instance only if nobody else uses it.
                    rt.instance.shutdown().await;
                }
                if matches!(e, ClientError::DuplicateGroup(_)) {
                    *self.state.lock() = ServiceState::CreateJust;
                }
                Err(e)
            }
        }
    }

    async fn start_inner(&self) -> Result<(), ClientError> {
        let Some(me) = self.arc() else {
            return Err(ClientError::Client("consumer dropped".into()));
        };
        let config = self.config.read().clone();
        let listener = self.listener.read().clone();
        config.check_with(listener.is_some())?;
        let Some(listener) = listener else {
            return Err(ClientError::IllegalArgument(
                "messageListener is null".into(),
            ));
        };
        let runtime = self.create_runtime(&config, listener)?;
        *self.runtime.write() = Some(Arc::clone(&runtime));
        let instance = Arc::clone(&runtime.instance);

        let registered: Arc<dyn MQConsumerInner> = Arc::clone(&me) as Arc<dyn MQConsumerInner>;
        instance.register_consumer(&config.consumer_group, registered)?;
        runtime.consume_service_start(&me);

        let pull_target = Arc::clone(&me);
        runtime.pull_service.start(move |request| {
            let consumer = Arc::clone(&pull_target);
            async move { consumer.pull_message(request).await }
        });
        if let Err(e) = instance.start().await {
            instance.unregister_consumer(&config.consumer_group);
            return Err(e);
        }

        // updateTopicSubscribeInfoWhenSubscriptionChanged
        for sub in runtime.rebalance.subscriptions() {
            if let Err(e) = instance
                .update_topic_route_info_from_name_server(&sub.topic)
                .await
            {
                tracing::warn!(topic = %sub.topic, error = %e, "fetching the route of a subscribed topic failed");
            }
        }
        if let Err(e) = self.check_client_in_broker(&runtime).await {
            instance.unregister_consumer(&config.consumer_group);
            return Err(e);
        }
        *self.state.lock() = ServiceState::Running;
        instance.send_heartbeat_to_all_brokers().await;
        instance.rebalance_immediately();
        tracing::info!(group = %config.consumer_group, client_id = %instance.client_id(),
            model = ?config.message_model, "push consumer started");
        Ok(())
    }

    /// Builds what exists between start and shutdown, before anything of it runs: the client
    /// instance (created, not started), the rebalance state with the subscriptions, the loaded
    /// offset store and the consume service.
    fn create_runtime(
        &self,
        config: &PushConsumerConfig,
        listener: MessageListener,
    ) -> Result<Arc<Runtime>, ClientError> {
        let subscriptions = self.start_subscriptions(config);

        let mut client_config = config.client.clone();
        if config.message_model == MessageModel::Clustering {
            client_config.change_instance_name_to_pid();
        }
        let instance = MQClientManager::get_or_create_instance(&client_config);

        let rebalance = RebalanceImpl::new(
            config.consumer_group.clone(),
            config.message_model,
            Arc::clone(&config.allocate_message_queue_strategy),
            Arc::clone(&instance),
        );
        for sub in subscriptions {
            rebalance.put_subscription(sub);
        }

        let offset_store = create_offset_store(config, &instance);
        offset_store.load()?;

        let consume_service = match listener {
            MessageListener::Orderly(l) => {
                ConsumeService::Orderly(ConsumeMessageOrderlyService::new(l, config))
            }
            MessageListener::Concurrently(l) => {
                ConsumeService::Concurrently(ConsumeMessageConcurrentlyService::new(l, config))
            }
        };
        let run_stop = self.stop.child_token();
        Ok(Arc::new(Runtime {
            stop: run_stop.clone(),
            instance,
            rebalance,
            offset_store,
            consume_service,
            pull_service: PullMessageService::new(run_stop, self.tasks.clone()),
            pull_from_which_node: Mutex::new(HashMap::new()),
        }))
    }

    /// The subscriptions a start registers: every subscribed topic and, in clustering, the
    /// group's retry topic (every tag), all with the start time as their version.
    fn start_subscriptions(&self, config: &PushConsumerConfig) -> Vec<SubscriptionData> {
        let sub_version = now_millis();
        let mut subscriptions: Vec<SubscriptionData> = self
            .subscription
            .lock()
            .iter()
            .map(|(topic, expr)| SubscriptionData::from_tag_expression(topic, expr, sub_version))
            .collect();
        if config.message_model == MessageModel::Clustering {
            subscriptions.push(SubscriptionData::from_tag_expression(
                retry_topic(&config.consumer_group),
                crate::consumer::SUB_ALL,
                sub_version,
            ));
        }
        subscriptions
    }

    /// CHECK_CLIENT_CONFIG for every non-TAG subscription: fails the start when a broker cannot
    /// filter the way the consumer asks.
    async fn check_client_in_broker(&self, rt: &Runtime) -> Result<(), ClientError> {
        let group = self.group();
        for sub in rt.rebalance.subscriptions() {
            if sub.expression_type.is_empty()
                || sub.expression_type == comet_protocol::body::heartbeat::EXPRESSION_TYPE_TAG
            {
                continue;
            }
            let Some(addr) = rt.instance.any_broker_addr_of_topic(&sub.topic) else {
                continue;
            };
            let body = comet_protocol::body::to_fastjson_bytes(&CheckClientRequestBody {
                client_id: rt.instance.client_id(),
                group: &group,
                subscription_data: &sub,
            })?;
            let request = rt
                .instance
                .api()
                .request(RequestCode::CheckClientConfig)
                .with_body(body);
            rt.instance
                .api()
                .invoke_success(&addr, request, rt.instance.config().mq_client_api_timeout)
                .await?;
        }
        Ok(())
    }

    /// Shuts a running consumer down (see [`super::DefaultMQPushConsumer::shutdown`]).
    pub(super) async fn shutdown(&self) {
        {
            // Like Java: only a running consumer shuts down; CREATE_JUST stays startable.
            let mut state = self.state.lock();
            if *state != ServiceState::Running {
                return;
            }
            *state = ServiceState::ShutdownAlready;
        }
        let Some(rt) = self.runtime() else { return };
        let group = self.group();
        // Stop pulling and refuse new consume work, let running listener calls finish
        // (bounded), persist what they committed, and only then drop the queues.
        self.stop.cancel();
        let wait = self.config.read().await_termination_when_shutdown;
        rt.consume_service_shutdown(wait).await;
        self.tasks.close();
        if tokio::time::timeout(wait.max(Duration::from_millis(1)), self.tasks.wait())
            .await
            .is_err()
        {
            tracing::debug!(group = %group, "consume tasks still running at shutdown");
        }
        self.persist_offsets_of(&rt).await;
        rt.rebalance.drop_all();
        rt.instance.unregister_consumer(&group);
        rt.instance.unregister_client(None, Some(&group)).await;
        rt.instance.shutdown().await;
        tracing::info!(group = %group, "push consumer shut down");
    }
}

/// The offset store of a start: the user's, else the one of the message model (the broker's for
/// clustering, a local file for broadcasting). Not loaded yet.
fn create_offset_store(
    config: &PushConsumerConfig,
    instance: &Arc<MQClientInstance>,
) -> Arc<dyn OffsetStore> {
    match &config.offset_store {
        Some(store) => Arc::clone(store),
        None => match config.message_model {
            MessageModel::Broadcasting => {
                let dir = config
                    .local_offset_store_dir
                    .clone()
                    .unwrap_or_else(default_local_offset_store_dir);
                Arc::new(LocalFileOffsetStore::new(
                    &dir,
                    instance.client_id(),
                    &config.consumer_group,
                ))
            }
            MessageModel::Clustering => Arc::new(RemoteBrokerOffsetStore::new(
                Arc::clone(instance),
                config.consumer_group.clone(),
            )),
        },
    }
}
