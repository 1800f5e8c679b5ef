//! The scheduled tasks of a client instance, started by its first start and stopped by its
//! shutdown: route refresh (every `poll_name_server_interval`), heartbeat (every
//! `heartbeat_broker_interval`), consumer offset persistence (every
//! `persist_consumer_offset_interval`) and the RebalanceService (every `rebalance_interval`, or at
//! once when woken, e.g. by NOTIFY_CONSUMER_IDS_CHANGED).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::{Instant, MissedTickBehavior};

use super::MQClientInstance;

/// Delay before the first route refresh after start (Java: 10 ms).
const FIRST_ROUTE_REFRESH_DELAY: Duration = Duration::from_millis(10);
/// Delay before the first periodic heartbeat after start (Java: 1 s).
const FIRST_HEARTBEAT_DELAY: Duration = Duration::from_secs(1);
/// Delay before the first periodic offset persistence after start (Java: 10 s).
const FIRST_PERSIST_DELAY: Duration = Duration::from_secs(10);

impl MQClientInstance {
    /// Wakes the RebalanceService now (e.g. on NOTIFY_CONSUMER_IDS_CHANGED).
    pub fn rebalance_immediately(&self) {
        self.rebalance_wakeup.notify_one();
    }

    /// Runs `do_rebalance` on every registered consumer, after any heartbeat round under way:
    /// the first broker a heartbeat reaches answers with NOTIFY_CONSUMER_IDS_CHANGED, and a
    /// rebalance started then would ask, and pull from, brokers that have not heard of the group
    /// yet (they answer "no consumer for this group" and "the consumer's group info not exist").
    pub async fn do_rebalance(&self) {
        drop(self.heartbeat_lock.lock().await);
        let consumers: Vec<_> = self.consumers.read().values().cloned().collect();
        for consumer in consumers {
            consumer.do_rebalance().await;
        }
    }

    /// Runs `persist_consumer_offset` on every registered consumer.
    pub async fn persist_all_consumer_offset(&self) {
        let consumers: Vec<_> = self.consumers.read().values().cloned().collect();
        for consumer in consumers {
            consumer.persist_consumer_offset().await;
        }
    }

    /// Runs `tick` at `first_delay` and every `period` after, until shutdown.
    fn spawn_periodic<F>(
        self: &Arc<Self>,
        name: &'static str,
        first_delay: Duration,
        period: Duration,
        tick: F,
    ) where
        F: Fn(Arc<MQClientInstance>) -> BoxFuture<'static, ()> + Send + 'static,
    {
        let instance = Arc::clone(self);
        let stop = self.stop.clone();
        self.tasks.spawn(async move {
            let mut interval = tokio::time::interval_at(Instant::now() + first_delay, period);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = interval.tick() => {}
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tick(Arc::clone(&instance)) => {}
                }
            }
            tracing::debug!(task = name, "scheduled task stopped");
        });
    }

    pub(super) fn spawn_route_refresh(self: &Arc<Self>) {
        let period = self.config.poll_name_server_interval;
        self.spawn_periodic("route refresh", FIRST_ROUTE_REFRESH_DELAY, period, |i| {
            Box::pin(async move { i.update_topic_route_info_for_all().await })
        });
    }

    pub(super) fn spawn_heartbeat(self: &Arc<Self>) {
        let period = self.config.heartbeat_broker_interval;
        self.spawn_periodic("heartbeat", FIRST_HEARTBEAT_DELAY, period, |i| {
            Box::pin(async move { i.send_heartbeat_to_all_brokers().await })
        });
    }

    pub(super) fn spawn_offset_persistence(self: &Arc<Self>) {
        let period = self.config.persist_consumer_offset_interval;
        self.spawn_periodic("offset persistence", FIRST_PERSIST_DELAY, period, |i| {
            Box::pin(async move { i.persist_all_consumer_offset().await })
        });
    }

    /// The RebalanceService: every `rebalance_interval`, or as soon as it is woken.
    pub(super) fn spawn_rebalance_service(self: &Arc<Self>) {
        let instance = Arc::clone(self);
        let stop = self.stop.clone();
        let period = self.config.rebalance_interval;
        self.tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(period) => {}
                    () = instance.rebalance_wakeup.notified() => {}
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = instance.do_rebalance() => {}
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::super::ServiceState;
    use super::super::test_support::{RecordingConsumer, config};
    use super::*;

    #[tokio::test]
    async fn rebalance_service_runs_when_woken_and_stops_at_shutdown() {
        let mut cfg = config("rebalance");
        // Long enough that only a wake-up can explain a prompt rebalance.
        cfg.rebalance_interval = Duration::from_secs(3600);
        let instance = MQClientInstance::new(cfg, "x@rebalance".to_string());
        let consumer = Arc::new(RecordingConsumer::default());
        instance
            .register_consumer("cg", consumer.clone())
            .expect("registers");
        instance.start().await.expect("starts");
        instance.start().await.expect("start is idempotent");
        instance.rebalance_immediately();
        let deadline = Instant::now() + Duration::from_secs(10);
        while consumer.rebalances.load(Ordering::SeqCst) == 0 {
            assert!(
                Instant::now() < deadline,
                "rebalance did not run after wake-up"
            );
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Shutdown waits for the last group to leave.
        instance.shutdown().await;
        assert_eq!(instance.service_state(), ServiceState::Running);
        instance.unregister_consumer("cg");
        instance.shutdown().await;
        assert_eq!(instance.service_state(), ServiceState::ShutdownAlready);
        assert!(
            instance.start().await.is_err(),
            "a shut-down instance cannot restart"
        );
    }

    #[tokio::test]
    async fn a_rebalance_waits_for_the_heartbeat_round_under_way() {
        let instance = MQClientInstance::new(config("hb-first"), "x@hb-first".to_string());
        let consumer = Arc::new(RecordingConsumer::default());
        instance
            .register_consumer("cg", consumer.clone())
            .expect("registers");
        let round = instance.heartbeat_lock.lock().await;
        let rebalance = instance.do_rebalance();
        tokio::pin!(rebalance);
        // However often it is polled, it does not run while the round holds the lock.
        for _ in 0..100 {
            assert!(futures::poll!(rebalance.as_mut()).is_pending());
            tokio::task::yield_now().await;
        }
        assert_eq!(consumer.rebalances.load(Ordering::SeqCst), 0);
        drop(round);
        rebalance.await;
        assert_eq!(consumer.rebalances.load(Ordering::SeqCst), 1);
    }
}
