//! The master side of the classic HA protocol: the HA listener, and per slave connection a
//! reader of its offset reports and a writer of CommitLog transfers.
//!
//! Every broker opens the listener (a slave too, as Apache's do). On a connection the master
//! sends nothing until the slave's first report, which says where to start: the reported
//! offset, or for an empty slave (report 0) the start of the master's newest segment. From then
//! on the writer sends what is written, at most `haTransferBatchSize` bytes per frame and never
//! across a segment's end, straight out of the mapped CommitLog; it waits for new appends (the
//! broker wakes it after each write of the send path) and sends a heartbeat after
//! `haSendHeartbeatInterval` without data.
//!
//! What a slave reports is checked before it counts, unlike in Apache 5.3.3 (its issues #3015
//! and #3388): a first report beyond the master's end or before its oldest segment ends the
//! connection with an error naming both offsets (the slave's log cannot continue this master's);
//! a later report that goes backwards or past what this connection was sent ends it too. A
//! slave silent for `haHousekeepingInterval`, or that stops reading for as long, is dropped.
//!
//! The three HA keys are read from the configuration in force as they are used: each frame takes
//! the batch size in force, each wait for data the heartbeat interval, and the silence of a slave
//! is measured against the housekeeping interval at least every [`SETTINGS_RECHECK`].

use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use comet_remoting::CancellationToken;
use comet_store::MessageStore;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::acks::ReplicaAcks;
use super::lag::{LagSummary, ReplicationLag};
use super::wire::{self, HEADER_LEN};
use super::{HaError, HaSettings, SETTINGS_RECHECK};
use crate::config::RuntimeConfig;

/// Longest wait for new data before the writer looks again on its own. The send path wakes the
/// writers after each write; bytes written elsewhere (delayed messages, transactions, the flush
/// thread committing a batch first) are sent at least this soon.
const IDLE_RECHECK: Duration = Duration::from_millis(10);

/// What the master knows of one connected slave (for statistics and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlaveLink {
    pub peer: SocketAddr,
    /// Where the slave asked to start, once it reported.
    pub requested: Option<i64>,
    /// End of what was sent to it.
    pub sent_end: i64,
}

/// State a connection's reader and writer share.
#[derive(Debug)]
struct Link {
    peer: SocketAddr,
    /// The slave's first report.
    request: watch::Sender<Option<i64>>,
    /// End of the bytes sent on this connection (or of what the slave held when it started):
    /// an acknowledgement never counts past it.
    sent_end: AtomicI64,
}

/// The HA service of a master: its listener, its slave connections and their acknowledgements.
#[derive(Debug)]
pub struct HaMaster {
    store: Arc<MessageStore>,
    acks: Arc<ReplicaAcks>,
    /// The configuration in force, read for the HA keys on each use.
    runtime: Arc<RuntimeConfig>,
    /// Woken after appends; each connection's writer waits on it when it has sent everything.
    written: Notify,
    /// From write to first acknowledgement.
    lag: ReplicationLag,
    next_id: AtomicU64,
    links: Mutex<Vec<(u64, Arc<Link>)>>,
    local_addr: Mutex<Option<SocketAddr>>,
}

impl HaMaster {
    pub fn new(
        store: Arc<MessageStore>,
        acks: Arc<ReplicaAcks>,
        runtime: Arc<RuntimeConfig>,
    ) -> Self {
        Self {
            store,
            acks,
            runtime,
            written: Notify::new(),
            lag: ReplicationLag::default(),
            next_id: AtomicU64::new(1),
            links: Mutex::new(Vec::new()),
            local_addr: Mutex::new(None),
        }
    }

    /// The HA settings in force.
    pub fn settings(&self) -> HaSettings {
        HaSettings::of(&self.runtime.read())
    }

    /// Tells the slave connections that the CommitLog grew to `end`. Cheap without slaves.
    pub fn wake(&self, end: i64) {
        self.lag.written(end);
        self.written.notify_waiters();
    }

    /// How long slaves take to acknowledge what the master wrote.
    pub fn lag(&self) -> LagSummary {
        self.lag.summary()
    }

    /// The acknowledgements of the slaves.
    pub fn acks(&self) -> &Arc<ReplicaAcks> {
        &self.acks
    }

    /// The address the HA listener is bound to.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        *self.local_addr.lock()
    }

    /// The slaves connected now.
    pub fn slaves(&self) -> Vec<SlaveLink> {
        self.links
            .lock()
            .iter()
            .map(|(_, link)| SlaveLink {
                peer: link.peer,
                requested: *link.request.borrow(),
                sent_end: link.sent_end.load(Ordering::Acquire),
            })
            .collect()
    }

    /// Binds the HA listener.
    pub async fn bind(&self, addr: SocketAddr) -> std::io::Result<TcpListener> {
        let listener = TcpListener::bind(addr).await?;
        *self.local_addr.lock() = listener.local_addr().ok();
        Ok(listener)
    }

    /// Accepts slave connections until `shutdown`.
    pub fn start(
        self: &Arc<Self>,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        let me = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                match accepted {
                    Ok((stream, peer)) => {
                        let me = Arc::clone(&me);
                        let stop = shutdown.child_token();
                        tokio::spawn(async move { me.serve(stream, peer, stop).await });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "HA listener accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        })
    }

    /// One slave connection, until it fails, idles out or the broker stops.
    async fn serve(self: Arc<Self>, stream: TcpStream, peer: SocketAddr, stop: CancellationToken) {
        let _ = stream.set_nodelay(true);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let link = Arc::new(Link {
            peer,
            request: watch::Sender::new(None),
            sent_end: AtomicI64::new(0),
        });
        self.links.lock().push((id, Arc::clone(&link)));
        self.lag.slave_connected(true);
        tracing::info!(%peer, "slave connected to the HA listener");
        let (read, write) = stream.into_split();
        let outcome = tokio::select! {
            _ = stop.cancelled() => Ok(()),
            r = self.read_reports(read, id, &link) => r,
            w = self.transfer(write, &link) => w,
        };
        self.acks.remove(id);
        self.lag.slave_connected(false);
        self.links.lock().retain(|(i, _)| *i != id);
        match outcome {
            Ok(()) => tracing::info!(%peer, "slave connection closed"),
            Err(e @ (HaError::Closed | HaError::Io(_))) => {
                tracing::info!(%peer, reason = %e, "slave connection closed")
            }
            Err(e) => tracing::error!(%peer, reason = %e, "slave connection dropped"),
        }
    }

    /// Reads the slave's offset reports; the first one sets where transfers start, each later
    /// one is its acknowledgement.
    async fn read_reports(
        &self,
        mut read: OwnedReadHalf,
        id: u64,
        link: &Link,
    ) -> Result<(), HaError> {
        let mut buf = [0u8; 1024];
        let mut filled = 0;
        let mut acked: Option<i64> = None;
        let mut last_read = Instant::now();
        loop {
            let housekeeping = self.settings().housekeeping;
            let silent_at = last_read + housekeeping;
            let wake = silent_at.min(Instant::now() + SETTINGS_RECHECK);
            let n = match tokio::time::timeout_at(wake, read.read(&mut buf[filled..])).await {
                Ok(read) => read?,
                Err(_) if Instant::now() >= silent_at => {
                    return Err(HaError::Silent(housekeeping));
                }
                Err(_) => continue,
            };
            if n == 0 {
                return Err(HaError::Closed);
            }
            last_read = Instant::now();
            filled += n;
            let (last, used) = wire::last_report(&buf[..filled]);
            buf.copy_within(used..filled, 0);
            filled -= used;
            let Some(report) = last else { continue };
            let ack = match acked {
                None => {
                    self.check_start(report)?;
                    link.sent_end.store(report, Ordering::Release);
                    link.request.send_replace(Some(report));
                    report
                }
                Some(previous) => {
                    let sent = link.sent_end.load(Ordering::Acquire);
                    if report < previous {
                        return Err(HaError::ReportWentBack { previous, report });
                    }
                    if report > sent {
                        return Err(HaError::ReportBeyondSent { report, sent });
                    }
                    report
                }
            };
            acked = Some(ack);
            self.acks.ack(id, ack);
            self.lag.acked(ack);
        }
    }

    /// A slave may start at 0 (empty) or anywhere within the master's log.
    fn check_start(&self, report: i64) -> Result<(), HaError> {
        let (min, max) = (self.store.min_phy_offset(), self.store.max_phy_offset());
        if report < 0 || report > max {
            return Err(HaError::SlaveAhead {
                slave: report,
                master: max,
            });
        }
        if report != 0 && report < min {
            return Err(HaError::SlaveBehindOldest {
                slave: report,
                oldest: min,
            });
        }
        Ok(())
    }

    /// Sends the log from where the slave asked, then whatever is written, with heartbeats.
    async fn transfer(&self, mut write: OwnedWriteHalf, link: &Link) -> Result<(), HaError> {
        let mut request = link.request.subscribe();
        let requested = loop {
            if let Some(offset) = *request.borrow_and_update() {
                break offset;
            }
            request.changed().await.map_err(|_| HaError::Closed)?;
        };
        let mut next = if requested == 0 {
            let max = self.store.max_phy_offset();
            max - max.rem_euclid(self.settings().segment_size)
        } else {
            requested
        };
        link.sent_end.fetch_max(next, Ordering::AcqRel);
        tracing::info!(peer = %link.peer, requested, from = next, "transferring the commit log to a slave");
        let mut last_write = Instant::now();
        loop {
            let settings = self.settings();
            let written = self.written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            if let Some(bytes) = self.store.read_replicated(next, settings.batch) {
                let header = wire::encode_header(next, bytes.len());
                self.send(&mut write, &header, &bytes).await?;
                next += i64::try_from(bytes.len()).unwrap_or(i64::MAX);
                link.sent_end.store(next, Ordering::Release);
                last_write = Instant::now();
                continue;
            }
            let oldest = self.store.min_phy_offset();
            if next < oldest {
                return Err(HaError::SlaveBehindOldest {
                    slave: next,
                    oldest,
                });
            }
            let heartbeat_due = last_write + settings.heartbeat;
            let recheck = (Instant::now() + IDLE_RECHECK).min(heartbeat_due);
            tokio::select! {
                _ = &mut written => {}
                _ = tokio::time::sleep_until(recheck) => {}
            }
            if Instant::now() >= heartbeat_due {
                self.send(&mut write, &wire::encode_header(next, 0), &[])
                    .await?;
                last_write = Instant::now();
            }
        }
    }

    /// Writes one frame (header and body in one `writev` where the socket takes them); a slave
    /// that takes none of it for `haHousekeepingInterval` is dropped.
    async fn send(
        &self,
        write: &mut OwnedWriteHalf,
        header: &[u8; HEADER_LEN],
        body: &[u8],
    ) -> Result<(), HaError> {
        let housekeeping = self.settings().housekeeping;
        tokio::time::timeout(housekeeping, write_frame(write, header, body))
            .await
            .map_err(|_| HaError::NotReading(housekeeping))?
            .map_err(HaError::Io)
    }
}

/// Writes `header` then `body`, gathered, until both are out.
async fn write_frame(
    write: &mut OwnedWriteHalf,
    header: &[u8; HEADER_LEN],
    body: &[u8],
) -> std::io::Result<()> {
    let (mut head, mut rest) = (&header[..], body);
    while !head.is_empty() || !rest.is_empty() {
        let n = if head.is_empty() {
            write.write(rest).await?
        } else {
            write
                .write_vectored(&[IoSlice::new(head), IoSlice::new(rest)])
                .await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_head = n.min(head.len());
        head = &head[from_head..];
        rest = &rest[n - from_head..];
    }
    Ok(())
}
