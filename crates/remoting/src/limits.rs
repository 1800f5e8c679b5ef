//! Every bound the transport enforces, in one place.
//!
//! A broker serves thousands of connections; each of them must cost bounded memory and tasks no
//! matter how a peer behaves. A peer that floods requests is slowed by the in-flight bound (the
//! connection simply stops reading), a peer that stops reading is cut off by the write-queue
//! bound (counted in bytes: a server connection whose unsent responses exceed the high-water mark
//! stops reading until its writer drains), and a silent peer is closed by the idle timeout.

use std::time::Duration;

/// Close a connection that has sent nothing for this long (RocketMQ
/// `serverChannelMaxIdleTimeSeconds`).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Requests of one connection processed at the same time. When reached, the connection stops
/// reading until one finishes, so TCP flow control pushes back on the sender. Large enough for a
/// consumer holding one long-polling pull per queue on a single connection.
pub const DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION: usize = 4096;

/// Requests this side may have outstanding (waiting for a response) on one connection. The Java
/// client's async semaphore has the same size.
pub const DEFAULT_MAX_PENDING_INVOKES_PER_CONNECTION: usize = 65_535;

/// Bytes queued for one connection's writer (encoded frames not yet handed to the socket) above
/// which the connection is congested: a server connection stops taking new requests, requests
/// already read wait before being processed, and server-to-client calls fail fast with
/// `WriteBufferFull`. 4 MiB is the `writeBufferHighWaterMark` RocketMQ 4.9.3 introduced as its
/// default (later releases set 0, leaving Netty's 64 KiB, which a single large pull response
/// exceeds). Bounding bytes rather than frames is what matters: one pull response can be 32
/// messages of up to 4 MiB each.
pub const DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK: usize = 4 * 1024 * 1024;

/// Smallest accepted high-water mark: below one typical pull response, the bound would stall a
/// connection after every frame.
pub const MIN_WRITE_BUFFER_HIGH_WATER_MARK: usize = 64 * 1024;

/// Largest accepted high-water mark: the per-connection memory a peer that stops reading can pin.
pub const MAX_WRITE_BUFFER_HIGH_WATER_MARK: usize = 1024 * 1024 * 1024;

/// A congested connection or a refused request is logged at most once per this interval per
/// endpoint (with the number of events since the last line), so a flood cannot flood the log.
pub const OVERLOAD_LOG_INTERVAL: Duration = Duration::from_secs(5);

/// Largest accepted idle timeout (`serverChannelMaxIdleTimeSeconds`): a day.
pub const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// Most frames the writer takes off the queue for one batch.
pub const WRITE_BATCH_MAX_FRAMES: usize = 256;

/// The writer copies small frames into one buffer and writes at most this many bytes of frames
/// with one vectored write (or what the batch holds), so many small responses cost one syscall.
pub const WRITE_COALESCE_BYTES: usize = 256 * 1024;

/// Bodies at least this large are written from their own buffer, as one part of a vectored write,
/// instead of being copied into the writer's buffer (a pull response of 32 records of 1 KiB).
pub const WRITE_DIRECT_THRESHOLD: usize = 4 * 1024;

/// Most parts of one vectored write (Linux's IOV_MAX is 1,024).
pub const WRITE_MAX_PARTS: usize = 512;

/// Once a connection is closed, its writer gets this long to flush what is queued.
pub const WRITE_DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// A server connection's reader lets the requests it spawned run after this many of them had to
/// wait, before reading on (see `ConnectionOptions::yield_after_waiting_requests`). With 32
/// concurrent synchronous 1 KiB sends on one connection under SYNC_FLUSH, the first sends then
/// ask for the group commit while the rest are appended: 40.1 k msg/s against 35.3 k without the
/// yield and 38.8 k after 8.
pub const READER_YIELD_AFTER_WAITING_REQUESTS: usize = 4;

/// Initial read buffer of a connection; it grows up to one whole frame when needed.
pub const READ_BUFFER_CAPACITY: usize = 64 * 1024;

/// Least bytes a read buffer grows by when a frame does not fit (see `codec.rs`): about seven
/// 32-message pull responses of 1 KiB bodies. A frame larger than this gets room for itself.
pub const READ_BUFFER_GROWTH: usize = 256 * 1024;

/// Graceful server shutdown waits this long for in-flight requests before closing connections.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Pause after a failed `accept` (e.g. out of file descriptors) so the loop does not spin.
pub const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Client: how long establishing a TCP connection may take (RocketMQ `connectTimeoutMillis`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Client: how long a oneway request may wait for a connection and room in the write queue.
pub const DEFAULT_ONEWAY_TIMEOUT: Duration = Duration::from_secs(3);
