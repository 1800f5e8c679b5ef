//! Write-buffer bounds over real sockets: a peer that pipelines requests and never reads its
//! responses must make the server stop reading (TCP pushes back) with the unsent bytes held under
//! the high-water mark, calls to that peer must fail fast, a well-behaved client on another
//! connection keeps being served, and once the slow peer reads, every response arrives.
//!
//! The test runs on a current-thread runtime, so "bytes queued when a request is processed" is
//! observed without interleaving: it must stay under the mark, which is exactly the transport's
//! guarantee (requests are held back *before* processing while the connection is congested).
//! Waits are on conditions with a deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use comet_protocol::RemotingCommand;
use comet_protocol::frame::{decode_frame, encode_to_bytes};
use comet_remoting::{
    Channel, ChannelEventListener, ClientConfig, RemotingClient, RemotingError, RemotingServer,
    RequestProcessor, ServerConfig,
};
use comet_testkit::eventually;
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const SUCCESS: i32 = 0;
const BIG: i32 = 100;
const ECHO: i32 = 101;
const NOTIFY: i32 = 40;
/// High-water mark of the test server: small, so the bound is reached quickly.
const HIGH_WATER: usize = 256 * 1024;
/// Body of every BIG response.
const RESPONSE_BODY: usize = 32 * 1024;
/// Requests the slow peer pipelines: 64 MiB of responses, far more than any socket buffers.
const PIPELINED: usize = 2000;
/// Receive buffer the slow peer asks for, so the kernel absorbs little on its side.
const SLOW_PEER_RCVBUF: u32 = 4096;
const DEADLINE: Duration = Duration::from_secs(30);
const RPC_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers BIG with a large body and records what the connection had queued at that moment.
struct Big {
    processed: AtomicUsize,
    max_queued_seen: AtomicUsize,
    channel: Mutex<Option<Channel>>,
}

impl RequestProcessor for Big {
    fn process(
        &self,
        channel: &Channel,
        _request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        self.processed.fetch_add(1, Ordering::SeqCst);
        self.max_queued_seen
            .fetch_max(channel.queued_bytes(), Ordering::SeqCst);
        *self.channel.lock() = Some(channel.clone());
        let body = Bytes::from(vec![b'x'; RESPONSE_BODY]);
        async move { Some(RemotingCommand::response(SUCCESS, None).with_body(body)) }.boxed()
    }
}

struct Echo;

impl RequestProcessor for Echo {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        async move {
            let mut rsp = RemotingCommand::response(SUCCESS, None);
            rsp.ext_fields = request.ext_fields;
            Some(rsp)
        }
        .boxed()
    }
}

/// Polls a condition of the server's counters (no future to await) until it holds.
async fn reached(what: &str, mut condition: impl FnMut() -> bool) {
    eventually(what, || std::future::ready(condition())).await;
}

#[tokio::test]
async fn slow_reader_is_bounded_in_bytes_and_others_keep_being_served() {
    let config = ServerConfig {
        write_buffer_high_water_mark: HIGH_WATER,
        ..ServerConfig::new("127.0.0.1:0")
    };
    let server = RemotingServer::bind(config).await.unwrap();
    let big = Arc::new(Big {
        processed: AtomicUsize::new(0),
        max_queued_seen: AtomicUsize::new(0),
        channel: Mutex::new(None),
    });
    server.register(BIG, Arc::clone(&big) as Arc<dyn RequestProcessor>);
    server.register(ECHO, Arc::new(Echo));
    let stats = server.stats();
    let addr = server.local_addr();
    let server = server.start();

    // The slow peer: pipelines every request, reads nothing.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(SLOW_PEER_RCVBUF).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    let (mut read_half, mut write_half) = stream.into_split();
    let mut wire = BytesMut::new();
    for i in 0..PIPELINED {
        let mut request = RemotingCommand::request(BIG);
        request.opaque = i as i32;
        wire.extend_from_slice(&encode_to_bytes(&request).unwrap());
    }
    let writer = tokio::spawn(async move {
        // May stall once the server stops reading; that is the point.
        let _ = write_half.write_all(&wire).await;
        write_half
    });

    reached("the server pauses reading", || stats.read_pauses() >= 1).await;
    let processed_at_pause = big.processed.load(Ordering::SeqCst);
    assert!(
        processed_at_pause < PIPELINED,
        "every request was processed although nothing was read"
    );
    // Never more than the mark was queued when a request was let through to processing.
    let max_seen = big.max_queued_seen.load(Ordering::SeqCst);
    assert!(
        max_seen < HIGH_WATER,
        "a request was processed with {max_seen} bytes queued (mark {HIGH_WATER})"
    );
    let channel = big.channel.lock().clone().expect("the slow peer's channel");
    assert!(!channel.is_writable());
    assert!(channel.queued_bytes() >= HIGH_WATER);
    assert!(
        channel.queued_bytes() < HIGH_WATER + 2 * (RESPONSE_BODY + 1024),
        "{} bytes queued for a connection with a {HIGH_WATER} byte mark",
        channel.queued_bytes()
    );

    // Calling the congested peer fails at once and is counted.
    let refused = channel
        .invoke_oneway(RemotingCommand::request(NOTIFY))
        .await;
    assert!(
        matches!(refused, Err(RemotingError::WriteBufferFull { limit, .. }) if limit == HIGH_WATER),
        "{refused:?}"
    );
    let refused = channel
        .invoke(RemotingCommand::request(NOTIFY), RPC_TIMEOUT)
        .await;
    assert!(matches!(
        refused,
        Err(RemotingError::WriteBufferFull { .. })
    ));
    assert_eq!(stats.write_buffer_refusals(), 2);

    // A well-behaved client on its own connection is served meanwhile.
    let client = RemotingClient::new(ClientConfig::default());
    for i in 0..20 {
        let mut request = RemotingCommand::request(ECHO);
        request.ext_mut().insert("i", i.to_string());
        let rsp = client
            .invoke(&addr.to_string(), request, RPC_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(rsp.code, SUCCESS);
        assert_eq!(
            rsp.ext_fields.as_ref().and_then(|f| f.get("i")),
            Some(i.to_string().as_str())
        );
    }

    // The slow peer starts reading: every response arrives, none was dropped.
    let mut buf = BytesMut::with_capacity(1024 * 1024);
    let mut opaques = vec![false; PIPELINED];
    let mut received = 0;
    let read_all = async {
        while received < PIPELINED {
            while let Some(rsp) = decode_frame(&mut buf).unwrap() {
                assert_eq!(rsp.body.as_ref().map(Bytes::len), Some(RESPONSE_BODY));
                let slot = opaques
                    .get_mut(usize::try_from(rsp.opaque).unwrap())
                    .expect("opaque in range");
                assert!(!*slot, "response {} twice", rsp.opaque);
                *slot = true;
                received += 1;
            }
            if received == PIPELINED {
                break;
            }
            let n = read_half.read_buf(&mut buf).await.unwrap();
            assert!(n > 0, "server closed after {received} responses");
        }
    };
    tokio::time::timeout(DEADLINE, read_all)
        .await
        .expect("all responses within the deadline");
    assert_eq!(big.processed.load(Ordering::SeqCst), PIPELINED);
    let write_half = writer.await.unwrap();
    drop(write_half);
    reached("the write buffer drains", || channel.queued_bytes() == 0).await;
    assert!(channel.is_writable());
    client.shutdown().await;
    server.shutdown().await;
}

/// Counts idle and close events.
#[derive(Default)]
struct Events {
    idle: AtomicUsize,
    closed: AtomicUsize,
}

impl ChannelEventListener for Events {
    fn on_idle(&self, _: &Channel) {
        self.idle.fetch_add(1, Ordering::SeqCst);
    }

    fn on_close(&self, _: &Channel) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

/// How long the stalled-peer test lets a paused connection wait for a drain.
const STALL_IDLE_TIMEOUT: Duration = Duration::from_millis(300);

#[tokio::test]
async fn a_peer_that_never_reads_is_closed_after_the_idle_timeout() {
    let config = ServerConfig {
        write_buffer_high_water_mark: HIGH_WATER,
        idle_timeout: Some(STALL_IDLE_TIMEOUT),
        ..ServerConfig::new("127.0.0.1:0")
    };
    let server = RemotingServer::bind(config).await.unwrap();
    let big = Arc::new(Big {
        processed: AtomicUsize::new(0),
        max_queued_seen: AtomicUsize::new(0),
        channel: Mutex::new(None),
    });
    server.register(BIG, Arc::clone(&big) as Arc<dyn RequestProcessor>);
    let events = Arc::new(Events::default());
    server.set_channel_event_listener(Arc::clone(&events) as Arc<dyn ChannelEventListener>);
    let stats = server.stats();
    let addr = server.local_addr();
    let server = server.start();

    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(SLOW_PEER_RCVBUF).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let mut wire = BytesMut::new();
    for i in 0..PIPELINED {
        let mut request = RemotingCommand::request(BIG);
        request.opaque = i as i32;
        wire.extend_from_slice(&encode_to_bytes(&request).unwrap());
    }
    let writer = tokio::spawn(async move {
        let _ = stream.write_all(&wire).await;
        stream
    });
    reached("the server pauses reading", || stats.read_pauses() >= 1).await;
    reached("the stalled connection is closed", || {
        events.closed.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(events.idle.load(Ordering::SeqCst), 1);
    let channel = big.channel.lock().clone().expect("the slow peer's channel");
    assert!(!channel.is_active());
    // Requests held when the connection closed were not processed.
    assert!(big.processed.load(Ordering::SeqCst) < PIPELINED);
    drop(writer.await.unwrap());
    server.shutdown().await;
}
