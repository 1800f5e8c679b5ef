//! The slave side of the classic HA protocol: dial the master's HA listener, report where the
//! local CommitLog ends, append every transfer at exactly the offset its header names, and report
//! again after each append.
//!
//! The master's HA address is `haMasterAddress` when set, else the one the name servers answer
//! the slave's registration with. The slave reports at once after connecting (Apache's master
//! sends nothing before the first report) and at least every `haSendHeartbeatInterval`; it drops
//! a connection on which nothing arrived for `haHousekeepingInterval`, and after any failure it
//! redials 5 s later. Both intervals are read from the configuration in force as they are used,
//! at least every [`SETTINGS_RECHECK`].
//!
//! A transfer whose offset is not where the local log ends (unless the log is empty) means the
//! two logs have diverged: the slave logs both offsets as an error and redials, and the master
//! resumes from the slave's report, so one that cannot (its log no longer holds that offset)
//! says so on its side too. Nothing in the stream is trusted: a header no master sends closes
//! the connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use comet_remoting::CancellationToken;
use comet_store::MessageStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::wire::{self, HEADER_LEN};
use super::{HaError, HaSettings, SETTINGS_RECHECK};
use crate::config::RuntimeConfig;

/// Wait before redialing after a failed connection or a dropped one.
pub const REDIAL_WAIT: Duration = Duration::from_secs(5);
/// Longest wait for the master's HA listener to accept.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The HA client of a slave.
#[derive(Debug)]
pub struct HaSlave {
    store: Arc<MessageStore>,
    /// The configuration in force, read for the HA keys on each use.
    runtime: Arc<RuntimeConfig>,
    /// The master's HA address; `haMasterAddress` pins it.
    master: watch::Sender<Option<String>>,
    pinned: bool,
    connected: AtomicBool,
    /// Offset last reported to the master.
    reported: AtomicI64,
    /// Connections that ended in an error.
    failed_connections: AtomicU64,
}

impl HaSlave {
    /// A client of the master at `pinned_master` (`haMasterAddress`), or of the master the name
    /// servers name when `None`.
    pub fn new(
        store: Arc<MessageStore>,
        runtime: Arc<RuntimeConfig>,
        pinned_master: Option<String>,
    ) -> Self {
        Self {
            store,
            runtime,
            pinned: pinned_master.is_some(),
            master: watch::Sender::new(pinned_master),
            connected: AtomicBool::new(false),
            reported: AtomicI64::new(-1),
            failed_connections: AtomicU64::new(0),
        }
    }

    /// The HA settings in force.
    pub fn settings(&self) -> HaSettings {
        HaSettings::of(&self.runtime.read())
    }

    /// The master's HA address as the name servers answered a registration; ignored when
    /// `haMasterAddress` pins it, and when the answer names none.
    pub fn learn_master(&self, ha_addr: Option<&str>) {
        let Some(addr) = ha_addr.filter(|a| !a.is_empty()) else {
            return;
        };
        if self.pinned {
            return;
        }
        self.master.send_if_modified(|current| {
            if current.as_deref() == Some(addr) {
                return false;
            }
            tracing::info!(old = ?current, new = addr, "master HA address updated");
            *current = Some(addr.to_owned());
            true
        });
    }

    /// The master's HA address in use.
    pub fn master_addr(&self) -> Option<String> {
        self.master.borrow().clone()
    }

    /// Whether a connection to the master is open.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Connections to the master that ended in an error so far.
    pub fn failed_connections(&self) -> u64 {
        self.failed_connections.load(Ordering::Acquire)
    }

    /// The offset last reported to the master (-1 before the first report).
    pub fn reported_offset(&self) -> i64 {
        self.reported.load(Ordering::Acquire)
    }

    /// Replicates until `shutdown`.
    pub fn start(self: &Arc<Self>, shutdown: CancellationToken) -> JoinHandle<()> {
        let me = Arc::clone(self);
        tokio::spawn(async move { me.run(shutdown).await })
    }

    async fn run(&self, shutdown: CancellationToken) {
        let mut master = self.master.subscribe();
        loop {
            let addr = loop {
                if let Some(addr) = master.borrow_and_update().clone() {
                    break addr;
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    changed = master.changed() => if changed.is_err() { return },
                }
            };
            let outcome = tokio::select! {
                _ = shutdown.cancelled() => return,
                outcome = self.replicate_from(&addr) => outcome,
            };
            self.connected.store(false, Ordering::Release);
            if outcome.is_err() {
                self.failed_connections.fetch_add(1, Ordering::AcqRel);
            }
            match outcome {
                Err(e @ (HaError::Diverged { .. } | HaError::BadFrame(_) | HaError::Store(_))) => {
                    tracing::error!(master = %addr, reason = %e, "replication from the master stopped; redialing")
                }
                Err(e) => {
                    tracing::warn!(master = %addr, reason = %e, "replication connection lost; redialing")
                }
                Ok(()) => {}
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(REDIAL_WAIT) => {}
            }
        }
    }

    /// One connection: report, then append transfers until something fails.
    async fn replicate_from(&self, addr: &str) -> Result<(), HaError> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| HaError::Silent(CONNECT_TIMEOUT))??;
        let _ = stream.set_nodelay(true);
        self.connected.store(true, Ordering::Release);
        tracing::info!(master = %addr, from = self.store.max_phy_offset(), "replicating from the master");
        let (mut read, mut write) = stream.into_split();
        let mut reported = self.store.max_phy_offset();
        self.report(&mut write, reported).await?;
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let (mut last_report, mut last_read) = (Instant::now(), Instant::now());
        loop {
            let settings = self.settings();
            let report_at = last_report + settings.heartbeat;
            let silent_at = last_read + settings.housekeeping;
            let wake = report_at
                .min(silent_at)
                .min(Instant::now() + SETTINGS_RECHECK);
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {
                    let now = Instant::now();
                    if now >= silent_at {
                        return Err(HaError::Silent(settings.housekeeping));
                    }
                    if now >= report_at {
                        self.report(&mut write, reported).await?;
                        last_report = Instant::now();
                    }
                }
                read = read.read_buf(&mut buf) => {
                    if read? == 0 {
                        return Err(HaError::Closed);
                    }
                    last_read = Instant::now();
                    self.append_frames(&mut buf)?;
                    let end = self.store.max_phy_offset();
                    if end > reported {
                        reported = end;
                        self.report(&mut write, reported).await?;
                        last_report = Instant::now();
                    }
                }
            }
        }
    }

    /// Appends every whole frame in `buf` and leaves a partial one there, with room reserved
    /// for the rest of it.
    fn append_frames(&self, buf: &mut BytesMut) -> Result<(), HaError> {
        while buf.len() >= HEADER_LEN {
            let mut head = [0u8; HEADER_LEN];
            head.copy_from_slice(&buf[..HEADER_LEN]);
            let header = wire::decode_header(&head).map_err(HaError::BadFrame)?;
            let local_end = self.store.max_phy_offset();
            if local_end != 0 && header.offset != local_end {
                return Err(HaError::Diverged {
                    master: header.offset,
                    slave: local_end,
                });
            }
            let frame_len = HEADER_LEN + header.size;
            if buf.len() < frame_len {
                buf.reserve(frame_len - buf.len());
                return Ok(());
            }
            if header.size > 0 {
                self.store
                    .append_replicated(header.offset, &buf[HEADER_LEN..frame_len])
                    .map_err(|e| HaError::Store(e.to_string()))?;
            }
            buf.advance(frame_len);
        }
        Ok(())
    }

    async fn report(&self, write: &mut OwnedWriteHalf, offset: i64) -> Result<(), HaError> {
        let housekeeping = self.settings().housekeeping;
        tokio::time::timeout(housekeeping, write.write_all(&wire::encode_report(offset)))
            .await
            .map_err(|_| HaError::NotReading(housekeeping))??;
        self.reported.store(offset, Ordering::Release);
        Ok(())
    }
}
