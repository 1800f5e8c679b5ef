//! Every bound the transport enforces, in one place.
//!
//! A broker serves thousands of connections; each of them must cost bounded memory and tasks no
//! matter how a peer behaves. A peer that floods requests is slowed by the in-flight bound (the
//! connection simply stops reading), a peer that stops reading is cut off by the write-queue
//! bound and its timeout, and a silent peer is closed by the idle timeout.

use std::time::Duration;

/// Close a connection that has sent nothing for this long (RocketMQ `channelMaxIdleTimeSeconds`).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Requests of one connection processed at the same time. When reached, the connection stops
/// reading until one finishes, so TCP flow control pushes back on the sender. Large enough for a
/// consumer holding one long-polling pull per queue on a single connection.
pub const DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION: usize = 4096;

/// Requests this side may have outstanding (waiting for a response) on one connection. The Java
/// client's async semaphore has the same size.
pub const DEFAULT_MAX_PENDING_INVOKES_PER_CONNECTION: usize = 65_535;

/// Frames queued for one connection's writer before senders have to wait.
pub const WRITE_QUEUE_CAPACITY: usize = 1024;

/// How long a sender waits for room in a full write queue before giving up with `SendFailed`.
pub const WRITE_QUEUE_TIMEOUT: Duration = Duration::from_secs(3);

/// Most frames the writer takes off the queue for one batch.
pub const WRITE_BATCH_MAX_FRAMES: usize = 256;

/// The writer copies small frames into one buffer and writes it when it reaches this size (or the
/// batch ends), so many small responses cost one syscall.
pub const WRITE_COALESCE_BYTES: usize = 256 * 1024;

/// Frames at least this large are written straight from their own buffer instead of being copied.
pub const WRITE_DIRECT_THRESHOLD: usize = 64 * 1024;

/// Once a connection is closed, its writer gets this long to flush what is queued.
pub const WRITE_DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// Initial read buffer of a connection; it grows up to one whole frame when needed.
pub const READ_BUFFER_CAPACITY: usize = 64 * 1024;

/// Graceful server shutdown waits this long for in-flight requests before closing connections.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Pause after a failed `accept` (e.g. out of file descriptors) so the loop does not spin.
pub const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Client: how long establishing a TCP connection may take (RocketMQ `connectTimeoutMillis`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Client: how long a oneway request may wait for a connection and room in the write queue.
pub const DEFAULT_ONEWAY_TIMEOUT: Duration = Duration::from_secs(3);
