//! The broker's registration with the name servers: once at start, every
//! `registerNameServerPeriod` (read at start, as Apache schedules it), right after a topic
//! change, and right after an update of `namesrvAddr`, `brokerIP1` or `brokerIP2`. A round
//! after topics were created or updated carries only those topics; the others carry the whole
//! table.
//!
//! Apache reads the name servers (`namesrvAddr`, re-read by its periodic name-server update) and
//! the announced addresses (`brokerIP1`, `brokerIP2`, read by every registration) from its
//! configuration while running; so does each round here, from the configuration in force. A
//! round first hands a changed `namesrvAddr` to the outer API, then registers the broker's
//! current identity ([`BrokerContext::identity`]) with every name server; when its address
//! changed since the last round, the old address is unregistered afterwards, so the routes go
//! from the old address to the new one without a gap and the old one does not linger until the
//! name servers expire it. Name servers dropped from `namesrvAddr` are not told: they expire the
//! broker as they would a stopped one.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::context::BrokerContext;
use crate::outer_api::{BrokerIdentity, RegisterReport};

/// What the last registration round used (see the module docs).
#[derive(Debug)]
pub struct Registration {
    /// `namesrvAddr` as last handed to the outer API.
    namesrv: Mutex<Vec<String>>,
    /// The identity last registered, to unregister when the address changes and at shutdown.
    last: Mutex<Option<BrokerIdentity>>,
}

impl Registration {
    /// No round yet; the outer API holds the name servers the broker started with.
    pub fn new(ctx: &BrokerContext) -> Self {
        Registration {
            namesrv: Mutex::new(ctx.config.namesrv_addr.clone()),
            last: Mutex::new(None),
        }
    }

    /// Whether the configuration in force asks for a round the last one did not make: other
    /// name servers or other addresses.
    fn outdated(&self, ctx: &BrokerContext) -> bool {
        ctx.live_config().namesrv_addr != *self.namesrv.lock()
            || self.last.lock().as_ref() != Some(&ctx.identity())
    }

    /// One round carrying the whole topic table (see [`Registration::register_round`]).
    pub async fn register_once(&self, ctx: &BrokerContext) -> RegisterReport {
        self.register_round(ctx, true).await
    }

    /// One round (see the module docs), each call bounded by the `registerBrokerTimeoutMills`
    /// in force; a slave learns its master from the answers. With `whole` false it carries
    /// only the topics changed since the last round (when only topics were created or updated):
    /// RocketMQ's incremental registration, whose cost does not grow with the table.
    async fn register_round(&self, ctx: &BrokerContext, whole: bool) -> RegisterReport {
        let (namesrv, timeout) = {
            let live = ctx.live_config();
            (live.namesrv_addr.clone(), live.register_broker_timeout())
        };
        {
            let mut handed = self.namesrv.lock();
            if *handed != namesrv {
                tracing::info!(previous = ?*handed, now = ?namesrv, "namesrvAddr changed: registering with the new name servers");
                ctx.outer_api.update_namesrv_addrs(namesrv.clone());
                *handed = namesrv;
            }
        }
        let identity = ctx.identity();
        let previous = self.last.lock().replace(identity.clone());
        let topics = ctx
            .topic_config
            .registration_table(ctx.broker_permission(), whole);
        let report = ctx
            .outer_api
            .register_broker_all(&identity, topics, timeout)
            .await;
        log_report("broker registration", &report);
        if !report.failed.is_empty() {
            ctx.topic_config.register_whole_next();
        }
        ctx.replication.on_registered(&report);
        if let Some(old) = previous.filter(|old| old.broker_addr != identity.broker_addr) {
            tracing::info!(previous = %old.broker_addr, now = %identity.broker_addr,
                "brokerIP1 changed: registered the new address, unregistering the old one");
            let gone = ctx.outer_api.unregister_broker_all(&old, timeout).await;
            for failure in &gone.failed {
                tracing::warn!(error = %failure, previous = %old.broker_addr,
                    "unregistering the previous address failed; the name server expires it");
            }
        }
        report
    }

    /// Unregisters the identity last registered (the current one if none was) from every name
    /// server (shutdown).
    pub async fn unregister(&self, ctx: &BrokerContext) -> RegisterReport {
        let timeout = ctx.live_config().register_broker_timeout();
        let identity = self.last.lock().clone().unwrap_or_else(|| ctx.identity());
        let report = ctx
            .outer_api
            .unregister_broker_all(&identity, timeout)
            .await;
        log_report("broker unregistration", &report);
        report
    }

    /// Registers every `registerNameServerPeriod`, right after each topic change, and right
    /// after an update that changes the name servers or the addresses.
    pub fn spawn(self: &Arc<Self>, ctx: &Arc<BrokerContext>) -> JoinHandle<()> {
        let weak = Arc::downgrade(ctx);
        let shutdown = ctx.shutdown.clone();
        let period = ctx.config.register_period();
        let mut changes = ctx.runtime.subscribe();
        let registration = Arc::clone(self);
        tokio::spawn(async move {
            let mut next = tokio::time::Instant::now() + period;
            loop {
                let Some(ctx) = weak.upgrade() else { return };
                // Only topics changed: the round carries those alone.
                let mut whole = true;
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep_until(next) => next += period,
                    _ = ctx.topic_config.changed() => whole = false,
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        if !registration.outdated(&ctx) {
                            continue;
                        }
                    }
                }
                if shutdown.is_cancelled() {
                    return;
                }
                registration.register_round(&ctx, whole).await;
                let now = tokio::time::Instant::now();
                if next < now {
                    next = now + period;
                }
            }
        })
    }
}

/// Logs a round's failures (retried at the next period) and successes.
pub fn log_report(what: &str, report: &RegisterReport) {
    for failure in &report.failed {
        tracing::warn!(error = %failure, "{what} failed; retried at the next period");
    }
    if !report.succeeded.is_empty() {
        tracing::debug!(name_servers = ?report.succeeded, "{what} done");
    }
}
