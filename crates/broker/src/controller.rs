//! `BrokerController`: start-up and shutdown of a broker.
//!
//! Start-up order matters for correctness, not just tidiness:
//! 1. open the store (recovery runs here, before anything can read or write);
//! 2. load topics (creating the system topics), groups, offsets and delay progress;
//! 3. bind the listener — its port is part of the store host written into every message id, so
//!    it must be known before the first message is accepted;
//! 4. register processors, wire the store's arriving listener to long polling, start the
//!    services (hold service, delay delivery, transaction checks, client housekeeping, periodic
//!    persistence);
//! 5. start serving, then register with the name servers (once immediately, then every
//!    `registerNameServerPeriod` and on every topic change).
//!
//! Shutdown reverses it: stop taking requests, answer every held pull once, stop the services,
//! unregister from the name servers, persist offsets/topics/groups/delay progress, flush and shut
//! the store down (which removes the `abort` marker, so the next start skips crash recovery).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use comet_acl::{AclError, DEFAULT_WATCH_INTERVAL, PlainAccessValidator};
use comet_config_file::ConfigFileError;
use comet_remoting::{CancellationToken, RemotingError, RemotingServer, ServerHandle};
use comet_store::{MessageStore, StoreError};
use thiserror::Error;
use tokio::task::JoinHandle;

use crate::client::{ClientHousekeeping, ConsumerManager, ProducerManager};
use crate::config::{BrokerConfig, ConfigError, MetricsExporterType, RuntimeConfig};
use crate::context::BrokerContext;
use crate::ha::Replication;
use crate::long_polling::{NotifyMessageArrivingListener, PullRequestHoldService};
use crate::offset_manager::ConsumerOffsetManager;
use crate::outer_api::{BrokerIdentity, BrokerOuterApi, RegisterReport};
use crate::processor;
use crate::processor::fence::CommitBeforeReply;
use crate::rebalance_lock::RebalanceLockManager;
use crate::registration::Registration;
use crate::schedule::ScheduleMessageService;
use crate::subscription_group::SubscriptionGroupManager;
use crate::timer::TimerMessageService;
use crate::topic_config::TopicConfigManager;
use crate::transaction::{self, TransactionService};

/// Why a broker could not start or stop cleanly.
#[derive(Debug, Error)]
pub enum BrokerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("message store: {0}")]
    Store(#[from] StoreError),
    #[error("broker metadata: {0}")]
    Metadata(#[from] ConfigFileError),
    #[error("remoting: {0}")]
    Remoting(#[from] RemotingError),
    #[error("ACL: {0}")]
    Acl(#[from] AclError),
    #[error("a blocking start-up or shutdown step failed: {0}")]
    Join(String),
    #[error("cannot listen for slaves on {0}: {1}")]
    HaListen(SocketAddr, std::io::Error),
    #[error("cannot serve metrics on {0} (metricsPromExporterHost/metricsPromExporterPort): {1}")]
    MetricsListen(SocketAddr, std::io::Error),
}

/// Starts brokers; see [`BrokerController::start`].
#[derive(Debug)]
pub struct BrokerController;

impl BrokerController {
    /// Starts a broker with `config` on the current tokio runtime (see the module docs).
    pub async fn start(mut config: BrokerConfig) -> Result<BrokerHandle, BrokerError> {
        config.validate()?;
        // Runtime changes go to this file; `getBrokerConfig` shows which.
        config.broker_config_path = Some(config.config_file_path());
        let config = Arc::new(config);
        let root = config.store_path_root_dir.clone();

        let store_config = config.to_store_config();
        let store = tokio::task::spawn_blocking(move || MessageStore::open(store_config))
            .await
            .map_err(|e| BrokerError::Join(e.to_string()))??;
        let report = store.recovery_report();
        tracing::info!(root = %root.display(), ?report, "message store opened");

        // From here on, a failed step closes the store again before the error is returned.
        let runtime = Arc::new(RuntimeConfig::new(Arc::clone(&config)));
        let replication = Arc::new(Replication::new(&runtime, &store));
        let opened = match open_tables_and_bind(&config, &replication).await {
            Ok(opened) => opened,
            Err(e) => {
                shutdown_store(&store).await;
                return Err(e);
            }
        };
        let local_addr = opened.server.local_addr();
        let broker_ip = config.resolve_broker_ip();
        let store_host = SocketAddr::new(broker_ip, local_addr.port());
        if config.broker_ip1.is_none() && config.bind_address.is_unspecified() {
            tracing::warn!(broker_ip = %broker_ip,
                "brokerIP1 not set: announcing {store_host} to name servers and in message ids (auto-detected); \
                 set brokerIP1 if clients must reach this broker at another address");
        } else {
            tracing::info!(store_host = %store_host, "broker address (brokerIP1:listenPort)");
        }

        let Opened {
            tables,
            acl,
            server,
            fast,
            idle_timeout,
            ha_listener,
            metrics_listener,
        } = opened;
        let ctx = build_context(
            &config,
            runtime,
            &store,
            tables,
            store_host,
            Arc::clone(&replication),
            idle_timeout,
        );
        let transactions = Arc::new(TransactionService::new(store_host.ip()));
        install_on_server(&server, &ctx, &transactions);
        if let Some(fast) = &fast {
            install_on_server(fast, &ctx, &transactions);
        }
        let mut tasks = start_services(&ctx, Arc::clone(&transactions), acl.as_ref());
        tasks.extend(replication.start(ha_listener, &store, &ctx.shutdown));
        let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
        if let Some(listener) = metrics_listener {
            tracing::info!(addr = ?metrics_addr, "metrics endpoint listening at /metrics");
            let transport = std::iter::once(&server)
                .chain(fast.as_ref())
                .map(RemotingServer::stats)
                .collect();
            match crate::metrics::serve(listener, &ctx, transport) {
                Ok(task) => tasks.push(task),
                Err(e) => tracing::error!(error = %e, "metrics endpoint not started"),
            }
        }

        let server = server.start();
        let fast = fast.map(RemotingServer::start);
        let registration = Arc::new(Registration::new(&ctx));
        let mut handle = BrokerHandle {
            ctx,
            server: Some(server),
            fast,
            tasks,
            registration,
            local_addr,
            metrics_addr,
            transactions,
            acl,
        };
        handle.register_now().await;
        let task = handle.registration.spawn(&handle.ctx);
        handle.tasks.push(task);
        tracing::info!(addr = %local_addr, broker = %config.broker_name, cluster = %config.broker_cluster_name,
            "broker started");
        Ok(handle)
    }
}

/// The broker's metadata tables, loaded from `<storePathRootDir>/config`.
struct MetadataTables {
    topic_config: Arc<TopicConfigManager>,
    subscription_groups: Arc<SubscriptionGroupManager>,
    consumer_offsets: Arc<ConsumerOffsetManager>,
    schedule: Arc<ScheduleMessageService>,
    timer: Arc<TimerMessageService>,
    request_modes: crate::pop::request_mode::MessageRequestModeManager,
    fifo: crate::pop::fifo::FifoBook,
}

impl MetadataTables {
    fn open(config: &Arc<BrokerConfig>) -> Result<Self, BrokerError> {
        let root = &config.store_path_root_dir;
        Ok(MetadataTables {
            topic_config: Arc::new(TopicConfigManager::open(root, Arc::clone(config))?),
            subscription_groups: Arc::new(SubscriptionGroupManager::open(
                root,
                config.auto_create_subscription_group,
            )?),
            consumer_offsets: Arc::new(ConsumerOffsetManager::open(root)?),
            schedule: Arc::new(ScheduleMessageService::open(
                root,
                config.delay_levels_millis(),
            )?),
            timer: Arc::new(TimerMessageService::open(root, config)?),
            request_modes: crate::pop::request_mode::MessageRequestModeManager::open(root)?,
            fifo: crate::pop::fifo::FifoBook::open(root)?,
        })
    }
}

/// What start-up opened and bound before anything runs.
struct Opened {
    tables: MetadataTables,
    acl: Option<Arc<PlainAccessValidator>>,
    server: RemotingServer,
    /// The fast (VIP) listener, `listenPort - 2`, where there is room for one.
    fast: Option<RemotingServer>,
    /// The idle timeout both listeners give the connections they accept.
    idle_timeout: comet_remoting::IdleTimeout,
    ha_listener: tokio::net::TcpListener,
    /// The metrics endpoint, with `metricsExporterType=PROM`.
    metrics_listener: Option<tokio::net::TcpListener>,
}

/// Loads the metadata tables and the ACL, and binds the listeners (main, fast, HA) with the ACL
/// hook installed before any processor can run, so no request is ever served unchecked.
async fn open_tables_and_bind(
    config: &Arc<BrokerConfig>,
    replication: &Replication,
) -> Result<Opened, BrokerError> {
    let tables = MetadataTables::open(config)?;
    let acl = if config.acl_enable {
        let path = config.acl_file_path();
        let validator = tokio::task::spawn_blocking(move || PlainAccessValidator::open(path))
            .await
            .map_err(|e| BrokerError::Join(e.to_string()))??;
        Some(Arc::new(validator))
    } else {
        None
    };
    let server = RemotingServer::bind(config.server_config()).await?;
    // One idle timeout for both listeners: `serverChannelMaxIdleTimeSeconds` changes it.
    let idle_timeout = server.idle_timeout().clone();
    let fast = match config.fast_listen_addr() {
        Some(addr) => {
            let mut fast_config = config.server_config();
            fast_config.listen_addr = addr.to_string();
            let mut fast = RemotingServer::bind(fast_config).await?;
            fast.share_idle_timeout(&idle_timeout);
            Some(fast)
        }
        None => None,
    };
    for listener in std::iter::once(&server).chain(fast.as_ref()) {
        if let Some(acl) = &acl {
            listener.add_rpc_hook(Arc::clone(acl) as Arc<dyn comet_remoting::RpcHook>);
        }
    }
    let ha_listener = replication
        .master
        .bind(config.ha_listen_addr())
        .await
        .map_err(|e| BrokerError::HaListen(config.ha_listen_addr(), e))?;
    let metrics_listener = if config.metrics_exporter_type == MetricsExporterType::Prom {
        let addr = config.metrics_listen_addr();
        let listener = crate::metrics::bind(addr)
            .await
            .map_err(|e| BrokerError::MetricsListen(addr, e))?;
        Some(listener)
    } else {
        None
    };
    Ok(Opened {
        tables,
        acl,
        server,
        fast,
        idle_timeout,
        ha_listener,
        metrics_listener,
    })
}

/// The state every processor and service shares.
fn build_context(
    config: &Arc<BrokerConfig>,
    runtime: Arc<RuntimeConfig>,
    store: &Arc<MessageStore>,
    tables: MetadataTables,
    store_host: SocketAddr,
    replication: Arc<Replication>,
    listener_idle_timeout: comet_remoting::IdleTimeout,
) -> Arc<BrokerContext> {
    let channel_expired = Duration::from_millis(config.channel_expired_timeout_ms);
    Arc::new(BrokerContext {
        config: Arc::clone(config),
        runtime,
        store: Arc::clone(store),
        topic_config: tables.topic_config,
        subscription_groups: tables.subscription_groups,
        consumer_offsets: tables.consumer_offsets,
        consumers: Arc::new(ConsumerManager::new(channel_expired)),
        producers: Arc::new(ProducerManager::new(channel_expired)),
        local_clients: crate::client::LocalClients::default(),
        rebalance_locks: Arc::new(RebalanceLockManager::new(config.rebalance_lock_max_live())),
        pull_hold: Arc::new(PullRequestHoldService::new(
            config.long_polling_enable,
            config.short_polling_time_ms,
        )),
        schedule: tables.schedule,
        timer: tables.timer,
        pop: Arc::new(crate::pop::PopService::new(
            &config.broker_cluster_name,
            config.revive_queue_num,
            tables.request_modes,
            tables.fifo,
        )),
        outer_api: Arc::new(BrokerOuterApi::new(config.namesrv_addr.clone())),
        replication,
        store_host,
        listener_idle_timeout,
        shutdown: CancellationToken::new(),
        traffic: Arc::new(crate::metrics::traffic::TrafficMetrics::new(true)),
        stats_windows: crate::metrics::windows::StatsWindows::default(),
        runtime_sampler: crate::runtime_info::RuntimeSampler::default(),
        create_times: crate::metrics::create_times::CreateTimes::default(),
        rpc: Arc::new(crate::metrics::rpc::RpcLatency::new(
            config.metrics_exporter_type == MetricsExporterType::Prom,
        )),
    })
}

/// Wires the store's arrivals to long polling and the server to the broker: the response
/// fence, every request route and the connection-close listener. Runs before the server
/// starts, so no send is answered before its append is committed.
fn install_on_server(
    server: &RemotingServer,
    ctx: &Arc<BrokerContext>,
    transactions: &Arc<TransactionService>,
) {
    ctx.store
        .set_arriving_listener(Some(Arc::new(NotifyMessageArrivingListener::new(
            Arc::clone(&ctx.pull_hold),
            Arc::clone(&ctx.pop),
        ))));
    server.set_response_fence(Arc::new(CommitBeforeReply::new(
        Arc::clone(&ctx.store),
        Arc::clone(&ctx.pull_hold),
        Arc::clone(&ctx.replication),
    )));
    processor::routes::register(server, ctx, transactions);
    if ctx.rpc.is_enabled() {
        let installed = server
            .set_request_observer(Arc::clone(&ctx.rpc) as Arc<dyn comet_remoting::RequestObserver>);
        debug_assert!(installed, "a fresh server has no request observer");
    }
    // The client tables (consumers, producers, held pulls) forget a connection when it closes.
    server.set_channel_event_listener(Arc::new(ClientHousekeeping::new(Arc::downgrade(ctx))));
}

/// Starts the background services: the pull hold service, delay delivery, client
/// housekeeping, periodic persistence, transaction checks and the ACL file watcher.
fn start_services(
    ctx: &Arc<BrokerContext>,
    transactions: Arc<TransactionService>,
    acl: Option<&Arc<PlainAccessValidator>>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    ctx.pull_hold.start(
        crate::processor::pull::PullAnswerer::of(ctx),
        ctx.shutdown.clone(),
    );
    tasks.push(ClientHousekeeping::start(ctx));
    tasks.push(spawn_persist_task(ctx));
    tasks.push(crate::metrics::sampling::start(ctx));
    tasks.push(crate::runtime_info::start(ctx));
    if ctx.config.is_slave() {
        // A slave's delayed and transactional messages arrive from its master, which delivers
        // and checks them; its metadata comes from the master too.
        tasks.push(crate::ha::sync::start(ctx));
    } else {
        tasks.extend(ctx.schedule.start(ctx));
        tasks.extend(ctx.timer.start(ctx));
        tasks.push(crate::pop::revive::start(ctx));
        tasks.push(transaction::check::start(transactions, ctx));
    }
    if let Some(acl) = acl {
        tasks.push(acl.spawn_watcher(DEFAULT_WATCH_INTERVAL, ctx.shutdown.clone()));
    }
    tasks
}

async fn shutdown_store(store: &Arc<MessageStore>) {
    let store = Arc::clone(store);
    match tokio::task::spawn_blocking(move || store.shutdown()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "store shutdown failed"),
        Err(e) => tracing::error!(error = %e, "store shutdown task failed"),
    }
}

/// Writes consumer offsets, delay progress and FIFO POP batches (when changed), and
/// `topics.json` whole when topic changes were journaled, every `flushConsumerOffsetInterval`.
fn spawn_persist_task(ctx: &Arc<BrokerContext>) -> JoinHandle<()> {
    let weak = Arc::downgrade(ctx);
    let shutdown = ctx.shutdown.clone();
    let period = Duration::from_millis(ctx.config.flush_consumer_offset_interval_ms);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let Some(ctx) = weak.upgrade() else { return };
            persist_tables(&ctx, false).await;
        }
    })
}

/// Persists offsets and delay progress (and, when `all`, topics and groups) off the runtime's
/// worker threads.
async fn persist_tables(ctx: &Arc<BrokerContext>, all: bool) {
    let ctx = Arc::clone(ctx);
    let outcome = tokio::task::spawn_blocking(move || {
        let mut errors = Vec::new();
        let offsets = if all {
            ctx.consumer_offsets.persist()
        } else {
            ctx.consumer_offsets.persist_if_dirty().map(|_| ())
        };
        if let Err(e) = offsets {
            errors.push(format!("consumerOffset.json: {e}"));
        }
        let delay = if all {
            ctx.schedule.persist()
        } else {
            ctx.schedule.persist_if_dirty().map(|_| ())
        };
        if let Err(e) = delay {
            errors.push(format!("delayOffset.json: {e}"));
        }
        let fifo = if all {
            ctx.pop.fifo.persist()
        } else {
            ctx.pop.fifo.persist_if_dirty().map(|_| ())
        };
        if let Err(e) = fifo {
            errors.push(format!("{}: {e}", crate::pop::fifo::FIFO_BOOK_FILE));
        }
        // Topic changes are in the journal beside topics.json; the file is written whole here.
        let topics = if all {
            ctx.topic_config.persist()
        } else {
            ctx.topic_config.persist_if_journaled().map(|_| ())
        };
        if let Err(e) = topics {
            errors.push(format!("topics.json: {e}"));
        }
        if all {
            if let Err(e) = ctx.timer.checkpoint() {
                errors.push(format!("timer checkpoint: {e}"));
            }
            if let Err(e) = ctx.subscription_groups.persist() {
                errors.push(format!("subscriptionGroup.json: {e}"));
            }
        }
        errors
    })
    .await;
    match outcome {
        Ok(errors) => {
            for e in errors {
                tracing::error!(error = %e, "persisting broker tables failed");
            }
        }
        Err(e) => tracing::error!(error = %e, "persist task failed"),
    }
}

/// A running broker.
pub struct BrokerHandle {
    ctx: Arc<BrokerContext>,
    server: Option<ServerHandle>,
    fast: Option<ServerHandle>,
    tasks: Vec<JoinHandle<()>>,
    /// The registration with the name servers (what the last round registered).
    registration: Arc<Registration>,
    local_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    /// The transaction service (END_TRANSACTION and the checks), shared with other front ends.
    transactions: Arc<TransactionService>,
    /// The ACL under `aclEnable`, which other front ends check their requests with too.
    acl: Option<Arc<PlainAccessValidator>>,
}

impl std::fmt::Debug for BrokerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerHandle")
            .field("local_addr", &self.local_addr)
            .field("broker_name", &self.ctx.config.broker_name)
            .finish()
    }
}

impl Drop for BrokerHandle {
    /// A handle dropped without [`BrokerHandle::shutdown`] still stops serving and stops the
    /// background tasks (which would otherwise keep the broker alive); the store then closes as
    /// after a crash, keeping its `abort` marker so the next start recovers.
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            tracing::warn!(broker = %self.ctx.config.broker_name, "broker handle dropped without shutdown");
            server.begin_shutdown();
            if let Some(fast) = self.fast.take() {
                fast.begin_shutdown();
            }
            self.ctx.shutdown.cancel();
        }
    }
}

impl BrokerHandle {
    /// The address the listener is bound to (the real port when `listenPort` was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where `/metrics` is served, with `metricsExporterType=PROM`.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The transaction service, for a front end that ends transactions.
    pub fn transactions(&self) -> &Arc<TransactionService> {
        &self.transactions
    }

    /// The ACL under `aclEnable`, for a front end that checks its requests against it.
    pub fn acl(&self) -> Option<&Arc<PlainAccessValidator>> {
        self.acl.as_ref()
    }

    /// `brokerIP1:port`, the address announced to name servers (written in message ids as the
    /// broker started).
    pub fn broker_addr(&self) -> String {
        self.ctx.broker_addr()
    }

    /// How this broker names itself to the name servers now.
    pub fn identity(&self) -> BrokerIdentity {
        self.ctx.identity()
    }

    /// The shared broker state (tests and embedding binaries).
    pub fn context(&self) -> &Arc<BrokerContext> {
        &self.ctx
    }

    /// Registers with every name server now.
    pub async fn register_now(&self) -> RegisterReport {
        self.registration.register_once(&self.ctx).await
    }

    /// Shuts the broker down gracefully (see the module docs).
    pub async fn shutdown(mut self) -> Result<(), BrokerError> {
        tracing::info!(broker = %self.ctx.config.broker_name, "broker shutting down");
        for server in self.server.iter().chain(&self.fast) {
            server.begin_shutdown();
        }
        self.ctx.pull_hold.answer_all_now();
        self.ctx.shutdown.cancel();
        for server in self.server.take().into_iter().chain(self.fast.take()) {
            server.shutdown().await;
        }
        let late = self.ctx.timer.take_late_tasks();
        for task in self.tasks.drain(..).chain(late) {
            if let Err(e) = task.await
                && e.is_panic()
            {
                tracing::error!(error = %e, "broker background task panicked");
            }
        }
        self.registration.unregister(&self.ctx).await;
        self.ctx.outer_api.shutdown().await;

        persist_tables(&self.ctx, true).await;
        self.ctx.store.set_arriving_listener(None);
        let store = Arc::clone(&self.ctx.store);
        tokio::task::spawn_blocking(move || -> Result<(), StoreError> {
            store.flush()?;
            store.shutdown()
        })
        .await
        .map_err(|e| BrokerError::Join(e.to_string()))??;
        tracing::info!(broker = %self.ctx.config.broker_name, "broker stopped");
        Ok(())
    }
}
