//! Replication of the CommitLog from a master to its slaves (RocketMQ's classic HA), and the
//! `SYNC_MASTER` rule that a send is answered only once enough brokers hold it.
//!
//! - [`wire`]: the protocol's frames.
//! - [`master`]: the HA listener every broker opens, and the transfers to each slave.
//! - [`slave`]: a slave's connection to its master.
//! - [`acks`]: what the slaves acknowledged, and the offset enough brokers hold.
//!
//! [`Replication`] ties them to a broker: the send path's fence wakes the transfers after each
//! write, and a `SYNC_MASTER`'s held answers wait for [`Replication::released`], the offset up to
//! which the log is both durable on the master (per `flushDiskType`) and held by
//! `inSyncReplicas` brokers.
//!
//! The HA keys change while the broker runs: the master's and the slave's connections read
//! `haTransferBatchSize`, `haSendHeartbeatInterval` and `haHousekeepingInterval` from the
//! configuration in force ([`RuntimeConfig`]) each time they use them, a held answer reads
//! `slaveTimeout` as it is held, and the in-sync count reads `haMaxGapNotInSync` when it is asked
//! for. `inSyncReplicas` is told to the acknowledgements right after an update
//! ([`Replication::config_changed`]), which publish the replicated offset again at once: a lowered
//! count releases the answers held for it, a raised one holds the next sends.

pub mod acks;
pub mod lag;
pub mod master;
pub mod slave;
pub mod sync;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use comet_remoting::CancellationToken;
use comet_store::{FlushDiskType, MessageStore};
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{BrokerConfig, BrokerRole, MAX_HA_BATCH_BYTES, RuntimeConfig};
use crate::outer_api::RegisterReport;
use acks::ReplicaAcks;
use master::HaMaster;
use slave::HaSlave;

/// Largest body one transfer frame may carry, sender or receiver.
pub const MAX_FRAME_BODY: usize = MAX_HA_BATCH_BYTES;

/// The HA settings of a broker, as a configuration has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HaSettings {
    /// Most bytes per transfer frame (`haTransferBatchSize`).
    pub batch: usize,
    /// `haSendHeartbeatInterval`.
    pub heartbeat: Duration,
    /// `haHousekeepingInterval`.
    pub housekeeping: Duration,
    /// Bytes per CommitLog segment.
    pub segment_size: i64,
}

/// Longest wait before a connection looks at the HA settings in force again, so that a shortened
/// `haHousekeepingInterval` or `haSendHeartbeatInterval` counts at most this late.
pub const SETTINGS_RECHECK: Duration = Duration::from_secs(1);

impl HaSettings {
    /// The settings of `config`.
    pub fn of(config: &BrokerConfig) -> Self {
        Self {
            batch: config.ha_transfer_batch_size.clamp(1, MAX_FRAME_BODY),
            heartbeat: Duration::from_millis(config.ha_send_heartbeat_interval_ms),
            housekeeping: Duration::from_millis(config.ha_housekeeping_interval_ms),
            segment_size: i64::try_from(config.mapped_file_size_commit_log)
                .unwrap_or(i64::MAX)
                .max(1),
        }
    }
}

/// Why an HA connection ended.
#[derive(Debug, Error)]
pub enum HaError {
    #[error("the peer closed the connection")]
    Closed,
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("nothing received for {0:?}")]
    Silent(Duration),
    #[error("the peer took no data for {0:?}")]
    NotReading(Duration),
    #[error(
        "the slave's commit log ends at {slave}, beyond the master's end {master}: it holds data this master never wrote; empty the slave's store to replicate this master"
    )]
    SlaveAhead { slave: i64, master: i64 },
    #[error(
        "the slave needs the log from offset {slave}, but the master's oldest segment starts at {oldest}; empty the slave's store to replicate this master"
    )]
    SlaveBehindOldest { slave: i64, oldest: i64 },
    #[error("the slave reported {report} after {previous}: reports never go back")]
    ReportWentBack { previous: i64, report: i64 },
    #[error("the slave reported {report}, but was sent the log only up to {sent}")]
    ReportBeyondSent { report: i64, sent: i64 },
    #[error(
        "the master sent data for offset {master} but the slave's log ends at {slave}: the two logs have diverged"
    )]
    Diverged { master: i64, slave: i64 },
    #[error("a frame no master sends: {0}")]
    BadFrame(wire::BadHeader),
    #[error("the slave's store refused the data: {0}")]
    Store(String),
}

/// A broker's replication: its HA listener, its slave client if it is a slave, and what a
/// `SYNC_MASTER`'s answers wait for.
#[derive(Debug)]
pub struct Replication {
    pub master: Arc<HaMaster>,
    pub slave: Option<Arc<HaSlave>>,
    /// `SYNC_MASTER`: the offset held answers wait for.
    released: Option<watch::Sender<u64>>,
    /// The configuration in force (`slaveTimeout`, `haMaxGapNotInSync`).
    runtime: Arc<RuntimeConfig>,
    /// Sends answered FLUSH_SLAVE_TIMEOUT.
    slave_timeouts: AtomicU64,
    /// A slave's master (main address), as the name servers last answered its registration:
    /// where its metadata comes from.
    master_addr: watch::Sender<Option<String>>,
}

impl Replication {
    /// The replication of a broker with the configuration in force `runtime` over `store`
    /// (nothing runs until [`Replication::start`]).
    pub fn new(runtime: &Arc<RuntimeConfig>, store: &Arc<MessageStore>) -> Self {
        let config = runtime.current();
        let acks = Arc::new(ReplicaAcks::new(config.required_copies()));
        let master = Arc::new(HaMaster::new(Arc::clone(store), acks, Arc::clone(runtime)));
        let slave = config.is_slave().then(|| {
            let pinned = Some(config.ha_master_address.clone()).filter(|a| !a.is_empty());
            Arc::new(HaSlave::new(Arc::clone(store), Arc::clone(runtime), pinned))
        });
        // The role is read only at start; the copies a `SYNC_MASTER` waits for may change.
        let released =
            (config.broker_role == BrokerRole::SyncMaster).then(|| watch::Sender::new(0));
        Self {
            master,
            slave,
            released,
            runtime: Arc::clone(runtime),
            slave_timeouts: AtomicU64::new(0),
            master_addr: watch::Sender::new(None),
        }
    }

    /// Takes an update of the configuration: `now` is the configuration in force. The
    /// acknowledgements count the copies `inSyncReplicas` now asks for, and publish the
    /// replicated offset again.
    pub fn config_changed(&self, now: &BrokerConfig) {
        let acks = self.master.acks();
        let copies = now.required_copies();
        if acks.required_copies() != copies {
            tracing::info!(
                previous = acks.required_copies(),
                copies,
                "copies a send waits for changed (inSyncReplicas)"
            );
            acks.set_required_copies(copies);
        }
    }

    /// Connected slaves within `haMaxGapNotInSync` bytes of the master's end (Apache's
    /// `inSyncSlaveNums`).
    pub fn in_sync_slaves(&self, master_end: i64) -> usize {
        let max_gap = self.runtime.read().ha_max_gap_not_in_sync;
        self.master.acks().in_sync(master_end, max_gap)
    }

    /// Takes what the name servers answered a registration: a slave learns its master's
    /// addresses (the HA one unless `haMasterAddress` pins it). An answer that names no master
    /// (it is gone from the name servers) stops the metadata copy until one names it again, as
    /// in Apache's slave; the HA client keeps the address it has and redials it.
    pub fn on_registered(&self, report: &RegisterReport) {
        let Some(slave) = &self.slave else { return };
        if report.succeeded.is_empty() {
            // No name server answered: nothing learned.
            return;
        }
        let addr = report.master.as_ref().and_then(|m| m.addr.clone());
        if let Some(master) = &report.master {
            slave.learn_master(master.ha_addr.as_deref());
        }
        self.master_addr.send_if_modified(|current| {
            let changed = *current != addr;
            if changed {
                tracing::info!(old = ?current, new = ?addr, "master address for the metadata copy updated");
            }
            current.clone_from(&addr);
            changed
        });
    }

    /// The slave's master's main address, updated on every registration.
    pub fn master_addr(&self) -> watch::Receiver<Option<String>> {
        self.master_addr.subscribe()
    }

    /// A `SYNC_MASTER` send was answered FLUSH_SLAVE_TIMEOUT: its record, ending at `until`,
    /// was not held by enough brokers within `slaveTimeout`.
    pub fn note_slave_timeout(&self, until: i64) {
        let timeouts = self.slave_timeouts.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(
            until,
            slaves = self.master.slaves().len(),
            timeouts,
            "a send's copies were not acknowledged within slaveTimeout (FLUSH_SLAVE_TIMEOUT)"
        );
    }

    /// Sends answered FLUSH_SLAVE_TIMEOUT so far.
    pub fn slave_timeouts(&self) -> u64 {
        self.slave_timeouts.load(Ordering::Relaxed)
    }

    /// How long a `SYNC_MASTER`'s answer waits for its copies (`slaveTimeout` in force); `None`
    /// when sends wait for no slave.
    pub fn slave_timeout(&self) -> Option<Duration> {
        self.waits_for_slaves()
            .then(|| Duration::from_millis(self.runtime.read().slave_timeout_ms))
    }

    /// Whether sends wait for slaves: a `SYNC_MASTER` whose `inSyncReplicas` asks for more than
    /// its own copy.
    pub fn waits_for_slaves(&self) -> bool {
        self.released.is_some() && self.master.acks().required_copies() > 1
    }

    /// The offset a `SYNC_MASTER`'s held answers wait for (under `SYNC_FLUSH` the flushed offset
    /// alone while no slave copy is required), `None` for any other role.
    pub fn released(&self) -> Option<watch::Receiver<u64>> {
        self.released.as_ref().map(watch::Sender::subscribe)
    }

    /// Starts the HA listener (bound already), the slave client of a slave, and the task that
    /// keeps [`Replication::released`] up to date.
    pub fn start(
        &self,
        listener: tokio::net::TcpListener,
        store: &Arc<MessageStore>,
        shutdown: &CancellationToken,
    ) -> Vec<JoinHandle<()>> {
        let mut tasks = vec![self.master.start(listener, shutdown.clone())];
        if let Some(slave) = &self.slave {
            tasks.push(slave.start(shutdown.clone()));
        }
        if let Some(released) = &self.released {
            let durable = (store.flush_disk_type() == FlushDiskType::SyncFlush)
                .then(|| store.flushed_watch());
            tasks.push(spawn_release(
                released.clone(),
                durable,
                self.master.acks().replicated(),
                shutdown.clone(),
            ));
        }
        tasks
    }
}

/// Publishes `min(durable, replicated)` whenever either moves (`durable` is everything when
/// the master does not wait for its disk).
fn spawn_release(
    released: watch::Sender<u64>,
    mut durable: Option<watch::Receiver<u64>>,
    mut replicated: watch::Receiver<u64>,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let flushed = durable
                .as_mut()
                .map_or(u64::MAX, |d| *d.borrow_and_update());
            let value = flushed.min(*replicated.borrow_and_update());
            released.send_if_modified(|current| {
                let changed = *current != value;
                *current = value;
                changed
            });
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = replicated.changed() => if changed.is_err() { return },
                changed = async {
                    match durable.as_mut() {
                        Some(d) => d.changed().await,
                        None => std::future::pending().await,
                    }
                } => if changed.is_err() { return },
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// A store and the configuration in force of a broker with `role`, under `dir`.
    fn broker(dir: &std::path::Path, role: BrokerRole) -> (Arc<MessageStore>, Arc<RuntimeConfig>) {
        let config = BrokerConfig {
            store_path_root_dir: dir.to_path_buf(),
            mapped_file_size_commit_log: 1024 * 1024,
            broker_role: role,
            broker_id: if role == BrokerRole::Slave { 1 } else { 0 },
            ha_master_address: "127.0.0.1:1".to_owned(),
            ..BrokerConfig::default()
        };
        let store = MessageStore::open(config.to_store_config()).expect("store opens");
        (store, Arc::new(RuntimeConfig::new(Arc::new(config))))
    }

    #[test]
    fn the_ha_services_read_the_configuration_in_force() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, runtime) = broker(dir.path(), BrokerRole::Slave);
        let replication = Replication::new(&runtime, &store);
        let slave = replication
            .slave
            .as_ref()
            .expect("a slave has an HA client");
        let started = HaSettings::of(&runtime.current());
        assert_eq!(replication.master.settings(), started);
        assert_eq!(slave.settings(), started);
        runtime
            .update(&pairs(&[
                ("haTransferBatchSize", "100"),
                ("haSendHeartbeatInterval", "50"),
                ("haHousekeepingInterval", "200"),
            ]))
            .expect("accepted");
        for now in [replication.master.settings(), slave.settings()] {
            assert_eq!(now.batch, 100);
            assert_eq!(now.heartbeat, Duration::from_millis(50));
            assert_eq!(now.housekeeping, Duration::from_millis(200));
            assert_eq!(now.segment_size, started.segment_size);
        }
        store.shutdown().expect("store stops");
    }

    #[test]
    fn a_sync_master_follows_in_sync_replicas_slave_timeout_and_the_gap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, runtime) = broker(dir.path(), BrokerRole::SyncMaster);
        let replication = Replication::new(&runtime, &store);
        let released = replication.released().expect("a SYNC_MASTER releases");
        assert!(replication.waits_for_slaves());
        assert_eq!(replication.slave_timeout(), Some(Duration::from_secs(3)));
        assert_eq!(*released.borrow(), 0, "no slave holds anything");

        let change = runtime
            .update(&pairs(&[("inSyncReplicas", "1"), ("slaveTimeout", "70")]))
            .expect("accepted");
        replication.config_changed(&change.current);
        assert!(!replication.waits_for_slaves());
        assert_eq!(replication.slave_timeout(), None);
        assert_eq!(replication.master.acks().required_copies(), 1);
        assert_eq!(
            *replication.master.acks().replicated().borrow(),
            u64::MAX,
            "no slave copy required: everything counts as replicated"
        );

        let change = runtime
            .update(&pairs(&[("inSyncReplicas", "2")]))
            .expect("accepted");
        replication.config_changed(&change.current);
        assert!(replication.waits_for_slaves());
        assert_eq!(replication.slave_timeout(), Some(Duration::from_millis(70)));
        assert_eq!(*replication.master.acks().replicated().borrow(), 0);

        replication.master.acks().ack(1, 400);
        assert_eq!(replication.in_sync_slaves(1000), 1);
        runtime
            .update(&pairs(&[("haMaxGapNotInSync", "600")]))
            .expect("accepted");
        assert_eq!(replication.in_sync_slaves(1000), 0, "600 bytes behind");
        store.shutdown().expect("store stops");
    }
}
