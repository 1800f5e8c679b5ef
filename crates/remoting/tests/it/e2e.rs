//! End-to-end tests over real sockets on 127.0.0.1. Synchronization is by channels and
//! responses; `tokio::time::timeout` only guards against hangs.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use comet_protocol::command::{FLAG_ONEWAY, FLAG_RESPONSE};
use comet_protocol::frame::{decode_frame, encode_to_bytes};
use comet_protocol::limits::MAX_FRAME_LEN;
use comet_protocol::{RemotingCommand, SerializeType};
use comet_remoting::{
    Channel, ChannelEventListener, ClientConfig, RemotingClient, RemotingError, RemotingServer,
    RequestProcessor, ResponseFence, RpcHook, ServerConfig, ServerHandle, Settled,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

const SUCCESS: i32 = 0;
const SYSTEM_ERROR: i32 = 1;
const SYSTEM_BUSY: i32 = 2;
const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
const NO_PERMISSION: i32 = 16;

const ECHO: i32 = 100;
const HANG: i32 = 101;
const PANIC: i32 = 102;
const GET_CONSUMER_RUNNING_INFO: i32 = 307;
const CALL_BACK: i32 = 500;

/// Hang guard for anything that should complete promptly (generous for a loaded CI box: only a
/// failing test waits this long).
const GUARD: Duration = Duration::from_secs(30);
const RPC_TIMEOUT: Duration = Duration::from_secs(3);
/// Idle timeout of the idle-close test: long enough that a starved server task still reads the
/// bad frame sent right after connecting before the idle timer fires.
const IDLE_TIMEOUT: Duration = Duration::from_secs(1);

async fn guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not complete within {GUARD:?}"),
    }
}

/// A processor built from a closure.
struct FnProcessor<F>(F);

impl<F> RequestProcessor for FnProcessor<F>
where
    F: Fn(&Channel, RemotingCommand) -> BoxFuture<'static, Option<RemotingCommand>>
        + Send
        + Sync
        + 'static,
{
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        (self.0)(channel, request)
    }
}

fn processor<F>(f: F) -> Arc<dyn RequestProcessor>
where
    F: Fn(&Channel, RemotingCommand) -> BoxFuture<'static, Option<RemotingCommand>>
        + Send
        + Sync
        + 'static,
{
    Arc::new(FnProcessor(f))
}

/// Answers with the request's ext fields and body, and the request code as remark.
fn echo() -> Arc<dyn RequestProcessor> {
    processor(|_, req| {
        async move {
            let mut rsp = RemotingCommand::response(SUCCESS, Some(format!("echo {}", req.code)));
            rsp.ext_fields = req.ext_fields;
            rsp.body = req.body;
            Some(rsp)
        }
        .boxed()
    })
}

async fn start(
    config: ServerConfig,
    setup: impl FnOnce(&RemotingServer),
) -> (ServerHandle, String) {
    let server = RemotingServer::bind(config).await.expect("server binds");
    server.register(ECHO, echo());
    setup(&server);
    let addr = server.local_addr().to_string();
    (server.start(), addr)
}

async fn start_default(setup: impl FnOnce(&RemotingServer)) -> (ServerHandle, String) {
    start(ServerConfig::new("127.0.0.1:0"), setup).await
}

fn request(code: i32, ser: SerializeType, tag: &str) -> RemotingCommand {
    let mut req = RemotingCommand::request(code).with_body(Bytes::from(format!("body-{tag}")));
    req.serialize_type = ser;
    req.ext_mut().insert("topic", "TopicTest");
    req.ext_mut().insert("tag", tag);
    req
}

async fn write_raw(stream: &mut TcpStream, cmd: &RemotingCommand) {
    stream
        .write_all(&encode_to_bytes(cmd).expect("encodes"))
        .await
        .expect("written");
}

/// Reads the next frame; `None` when the server closed the connection.
async fn read_raw(stream: &mut TcpStream, buf: &mut BytesMut) -> Option<RemotingCommand> {
    loop {
        if let Some(cmd) = decode_frame(buf).expect("a well-formed frame") {
            return Some(cmd);
        }
        match stream.read_buf(buf).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

#[tokio::test]
async fn echo_round_trips_with_both_codecs_and_matches_opaque() {
    let (server, addr) = start_default(|_| {}).await;
    for ser in [SerializeType::Json, SerializeType::RocketMq] {
        // Through the client.
        let client = RemotingClient::new(ClientConfig {
            serialize_type: ser,
            ..ClientConfig::default()
        });
        let req = request(ECHO, ser, "client");
        let rsp = client
            .invoke(&addr, req.clone(), RPC_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(rsp.code, SUCCESS);
        assert_eq!(rsp.serialize_type, ser, "response uses the request's codec");
        assert_eq!(rsp.ext_fields, req.ext_fields);
        assert_eq!(rsp.body, req.body);
        assert_eq!(rsp.remark.as_deref(), Some("echo 100"));
        client.shutdown().await;

        // On a raw socket, with opaques chosen by the test.
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        let mut buf = BytesMut::new();
        for opaque in [7, 123_456, -5] {
            let mut req = request(ECHO, ser, &opaque.to_string());
            req.opaque = opaque;
            write_raw(&mut stream, &req).await;
            let rsp = guard("echo", read_raw(&mut stream, &mut buf))
                .await
                .unwrap();
            assert_eq!(rsp.opaque, opaque);
            assert_eq!(rsp.flag, FLAG_RESPONSE);
            assert_eq!(rsp.serialize_type, ser);
            assert_eq!(rsp.body, req.body);
            assert_eq!(rsp.ext("tag"), Some(opaque.to_string().as_str()));
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn oneway_request_is_processed_but_never_answered() {
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let (server, addr) = start_default(move |s| {
        s.register(
            HANG,
            processor(move |_, req| {
                let seen = seen_tx.clone();
                async move {
                    let _ = seen.send(req.opaque);
                    // Deliberately returns a response: the transport must drop it.
                    Some(RemotingCommand::response(SUCCESS, None))
                }
                .boxed()
            }),
        );
    })
    .await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let mut oneway = RemotingCommand::request(HANG);
    oneway.opaque = 1;
    oneway.flag = FLAG_ONEWAY;
    write_raw(&mut stream, &oneway).await;
    assert_eq!(guard("oneway processed", seen_rx.recv()).await, Some(1));
    let mut next = request(ECHO, SerializeType::Json, "after");
    next.opaque = 2;
    write_raw(&mut stream, &next).await;
    let mut buf = BytesMut::new();
    let rsp = guard("response", read_raw(&mut stream, &mut buf))
        .await
        .unwrap();
    assert_eq!(
        rsp.opaque, 2,
        "the first frame received answers the second request"
    );
    assert_eq!(rsp.remark.as_deref(), Some("echo 100"));

    // The client's oneway path sets the flag itself.
    let client = RemotingClient::new(ClientConfig::default());
    client
        .invoke_oneway(&addr, RemotingCommand::request(HANG))
        .await
        .unwrap();
    assert!(
        guard("client oneway processed", seen_rx.recv())
            .await
            .is_some()
    );
    client.shutdown().await;
    server.shutdown().await;
}

fn hanging() -> Arc<dyn RequestProcessor> {
    processor(|_, _| futures::future::pending().boxed())
}

#[tokio::test]
async fn unanswered_request_times_out_and_leaves_no_pending_entry() {
    let (server, addr) = start(
        ServerConfig {
            shutdown_grace: Duration::from_millis(50),
            ..ServerConfig::new("127.0.0.1:0")
        },
        |s| s.register(HANG, hanging()),
    )
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let timeout = Duration::from_millis(200);
    let err = client
        .invoke(&addr, RemotingCommand::request(HANG), timeout)
        .await
        .unwrap_err();
    match err {
        RemotingError::Timeout {
            addr: a,
            timeout: t,
        } => {
            assert_eq!(a, addr);
            assert_eq!(t, timeout);
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    let channel = client
        .channel(&addr)
        .expect("connection stays open after a timeout");
    assert_eq!(channel.pending_requests(), 0);
    // The connection is still usable.
    let rsp = client
        .invoke(&addr, request(ECHO, SerializeType::Json, "x"), RPC_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(rsp.code, SUCCESS);
    client.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_code_is_not_supported() {
    let (server, addr) = start_default(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let rsp = client
        .invoke(&addr, RemotingCommand::request(9999), RPC_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(rsp.code, REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        rsp.remark.as_deref(),
        Some("request type 9999 not supported")
    );
    client.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn default_processor_takes_unregistered_codes() {
    let (server, addr) = start_default(|s| s.set_default_processor(echo())).await;
    let client = RemotingClient::new(ClientConfig::default());
    let rsp = client
        .invoke(&addr, RemotingCommand::request(4321), RPC_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(rsp.remark.as_deref(), Some("echo 4321"));
    client.shutdown().await;
    server.shutdown().await;
}

/// Asserts that the server closes `stream` (after it sent something bad), then that a new
/// connection is still served.
async fn assert_closed_then_served(mut stream: TcpStream, addr: &str) {
    let mut buf = BytesMut::new();
    let next = guard(
        "server closes the connection",
        read_raw(&mut stream, &mut buf),
    )
    .await;
    assert!(
        next.is_none(),
        "server answered instead of closing: {next:?}"
    );
    let client = RemotingClient::new(ClientConfig::default());
    let rsp = client
        .invoke(
            addr,
            request(ECHO, SerializeType::Json, "fresh"),
            RPC_TIMEOUT,
        )
        .await
        .expect("the server answers a new connection");
    assert_eq!(rsp.code, SUCCESS);
    client.shutdown().await;
}

#[tokio::test]
async fn oversized_frame_closes_only_that_connection() {
    let (server, addr) = start_default(|_| {}).await;
    let mut bystander = TcpStream::connect(&addr).await.unwrap();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(&((MAX_FRAME_LEN + 1) as u32).to_be_bytes())
        .await
        .unwrap();
    assert_closed_then_served(stream, &addr).await;
    // A connection opened before is unaffected.
    let mut req = request(ECHO, SerializeType::Json, "bystander");
    req.opaque = 77;
    write_raw(&mut bystander, &req).await;
    let mut buf = BytesMut::new();
    let rsp = guard("bystander", read_raw(&mut bystander, &mut buf))
        .await
        .unwrap();
    assert_eq!(rsp.opaque, 77);
    server.shutdown().await;
}

#[tokio::test]
async fn garbage_frame_closes_only_that_connection() {
    let (server, addr) = start_default(|_| {}).await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let mut garbage = BytesMut::new();
    garbage.put_u32(4 + 5);
    garbage.put_u32(5); // JSON header of 5 bytes
    garbage.put_slice(b"{{{{{");
    stream.write_all(&garbage).await.unwrap();
    assert_closed_then_served(stream, &addr).await;

    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let mut unknown_codec = BytesMut::new();
    unknown_codec.put_u32(4);
    unknown_codec.put_u32(9 << 24);
    stream.write_all(&unknown_codec).await.unwrap();
    assert_closed_then_served(stream, &addr).await;
    server.shutdown().await;
}

/// Holds requests until `GROUP` of them arrived, then answers that group in reverse order.
struct ReverseGroups {
    held: Mutex<Vec<(RemotingCommand, oneshot::Sender<RemotingCommand>)>>,
}

const GROUP: usize = 50;

impl RequestProcessor for ReverseGroups {
    fn process(
        &self,
        _: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let (tx, rx) = oneshot::channel();
        let release = {
            let mut held = self.held.lock();
            held.push((request, tx));
            if held.len() == GROUP {
                std::mem::take(&mut *held)
            } else {
                Vec::new()
            }
        };
        for (req, tx) in release.into_iter().rev() {
            let mut body = req.body.map(|b| b.to_vec()).unwrap_or_default();
            body.reverse();
            let rsp = RemotingCommand::response(SUCCESS, None).with_body(body);
            let _ = tx.send(rsp);
        }
        async move { rx.await.ok() }.boxed()
    }
}

#[tokio::test]
async fn thousand_concurrent_requests_on_one_connection_are_matched() {
    const N: usize = 1000;
    let (server, addr) = start_default(|s| {
        s.register(
            ECHO + 1,
            Arc::new(ReverseGroups {
                held: Mutex::new(Vec::new()),
            }),
        )
    })
    .await;
    let connects = Arc::new(CountingListener::default());
    let client = RemotingClient::new(ClientConfig::default());
    client.set_channel_event_listener(connects.clone());
    let calls = (0..N).map(|i| {
        let client = client.clone();
        let addr = addr.clone();
        async move {
            let req = RemotingCommand::request(ECHO + 1)
                .with_body(format!("request-{i:04}").into_bytes());
            let rsp = client
                .invoke(&addr, req, Duration::from_secs(10))
                .await
                .unwrap();
            (i, rsp)
        }
    });
    let results = guard("1000 requests", futures::future::join_all(calls)).await;
    for (i, rsp) in results {
        let mut expected = format!("request-{i:04}").into_bytes();
        expected.reverse();
        assert_eq!(
            rsp.body.as_deref(),
            Some(expected.as_slice()),
            "response {i} mismatched"
        );
    }
    assert_eq!(
        connects.connected.load(Ordering::SeqCst),
        1,
        "concurrent first callers share one connection"
    );
    assert_eq!(client.channel(&addr).unwrap().pending_requests(), 0);
    client.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn server_calls_back_into_the_client_over_the_same_connection() {
    let (server, addr) = start_default(|s| {
        s.register(
            CALL_BACK,
            processor(|channel, _req| {
                let channel = channel.clone();
                async move {
                    let mut ask = RemotingCommand::request(GET_CONSUMER_RUNNING_INFO);
                    ask.ext_mut().insert("consumerGroup", "G1");
                    let answer = match channel.invoke(ask, RPC_TIMEOUT).await {
                        Ok(answer) => answer,
                        Err(e) => {
                            return Some(RemotingCommand::response(
                                SYSTEM_ERROR,
                                Some(e.to_string()),
                            ));
                        }
                    };
                    let mut rsp = RemotingCommand::response(SUCCESS, None);
                    rsp.body = answer.body;
                    Some(rsp)
                }
                .boxed()
            }),
        )
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    client.register(
        GET_CONSUMER_RUNNING_INFO,
        processor(|channel, req| {
            let local = channel.local_addr();
            async move {
                let group = req.ext("consumerGroup").unwrap_or("?").to_string();
                Some(
                    RemotingCommand::response(SUCCESS, None)
                        .with_body(format!("running {group} at {local}")),
                )
            }
            .boxed()
        }),
    );
    let rsp = client
        .invoke(&addr, RemotingCommand::request(CALL_BACK), RPC_TIMEOUT)
        .await
        .unwrap();
    let local = client.channel(&addr).unwrap().local_addr();
    assert_eq!(rsp.code, SUCCESS, "{:?}", rsp.remark);
    assert_eq!(
        rsp.body.as_deref(),
        Some(format!("running G1 at {local}").as_bytes())
    );
    client.shutdown().await;
    server.shutdown().await;
}

/// A client processor that blocks its thread (application code in a transaction check or a
/// direct consume may) must not hold up the responses the client's reader has yet to deliver:
/// requests on client connections get their own task, never run on the reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_client_processor_does_not_stall_responses() {
    const BLOCKING: i32 = 501;
    const NOTIFY_THEN_ANSWER: i32 = 502;
    let (server, addr) = start_default(|s| {
        s.register(
            NOTIFY_THEN_ANSWER,
            processor(|channel, _req| {
                let channel = channel.clone();
                async move {
                    // Queued on the connection before this request's response.
                    let notified = channel
                        .invoke_oneway(RemotingCommand::request(BLOCKING))
                        .await;
                    let code = if notified.is_ok() {
                        SUCCESS
                    } else {
                        SYSTEM_ERROR
                    };
                    Some(RemotingCommand::response(code, None))
                }
                .boxed()
            }),
        )
    })
    .await;
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
    let (entered_tx, mut entered_rx) = mpsc::unbounded_channel::<()>();
    let client = RemotingClient::new(ClientConfig::default());
    client.register(
        BLOCKING,
        processor(move |_, _| {
            let release_rx = Arc::clone(&release_rx);
            let entered_tx = entered_tx.clone();
            async move {
                let _ = entered_tx.send(());
                // Blocks this thread until the test saw its response (or gave up).
                if let Ok(rx) = release_rx.lock() {
                    let _ = rx.recv_timeout(GUARD);
                }
                None
            }
            .boxed()
        }),
    );
    let answer = client
        .invoke(
            &addr,
            RemotingCommand::request(NOTIFY_THEN_ANSWER),
            RPC_TIMEOUT,
        )
        .await;
    guard("the blocking processor to start", entered_rx.recv()).await;
    let _ = release_tx.send(());
    let answer = answer.unwrap_or_else(|e| panic!("response stalled behind the processor: {e}"));
    assert_eq!(answer.code, SUCCESS);
    client.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn connection_drop_fails_pending_requests_promptly() {
    let (chan_tx, mut chan_rx) = mpsc::unbounded_channel::<Channel>();
    let (server, addr) = start(
        ServerConfig {
            shutdown_grace: Duration::from_millis(50),
            ..ServerConfig::new("127.0.0.1:0")
        },
        move |s| {
            s.register(
                HANG,
                processor(move |channel, _| {
                    let _ = chan_tx.send(channel.clone());
                    futures::future::pending().boxed()
                }),
            )
        },
    )
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let pending = tokio::spawn({
        let client = client.clone();
        let addr = addr.clone();
        async move {
            client
                .invoke(
                    &addr,
                    RemotingCommand::request(HANG),
                    Duration::from_secs(30),
                )
                .await
        }
    });
    let server_side = guard("request reaches the server", chan_rx.recv())
        .await
        .unwrap();
    server_side.close();
    let result = guard("pending invoke fails", pending).await.unwrap();
    match result {
        Err(RemotingError::ConnectionClosed { addr: a }) => assert_eq!(a, addr),
        other => panic!("expected ConnectionClosed, got {other:?}"),
    }
    // The next call reconnects.
    let rsp = client
        .invoke(
            &addr,
            request(ECHO, SerializeType::Json, "again"),
            RPC_TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(rsp.code, SUCCESS);
    client.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn processor_panic_answers_system_error_and_server_keeps_serving() {
    let (server, addr) = start_default(|s| {
        s.register(
            PANIC,
            processor(|_, _| async { panic!("boom in processor") }.boxed()),
        );
        // Panics while building the future, not while polling it.
        s.register(PANIC + 1, processor(|_, _| panic!("boom before future")));
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    for (code, text) in [
        (PANIC, "boom in processor"),
        (PANIC + 1, "boom before future"),
    ] {
        let rsp = client
            .invoke(&addr, RemotingCommand::request(code), RPC_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(rsp.code, SYSTEM_ERROR);
        let remark = rsp.remark.unwrap_or_default();
        assert!(remark.contains(text), "remark {remark:?}");
    }
    let rsp = client
        .invoke(
            &addr,
            request(ECHO, SerializeType::Json, "after panic"),
            RPC_TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(rsp.code, SUCCESS);
    client.shutdown().await;
    server.shutdown().await;
}

/// Always in flow control; counts the requests it processes anyway.
struct Busy {
    processed: Arc<AtomicUsize>,
}

impl RequestProcessor for Busy {
    fn process(
        &self,
        _: &Channel,
        _: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        self.processed.fetch_add(1, Ordering::SeqCst);
        async { Some(RemotingCommand::response(SUCCESS, None)) }.boxed()
    }

    fn reject(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn rejecting_processor_answers_system_busy_counts_it_and_never_drops_a_oneway() {
    let processed = Arc::new(AtomicUsize::new(0));
    let busy = Arc::new(Busy {
        processed: Arc::clone(&processed),
    });
    let server = RemotingServer::bind(ServerConfig::new("127.0.0.1:0"))
        .await
        .unwrap();
    server.register(HANG, busy);
    let stats = server.stats();
    let addr = server.local_addr().to_string();
    let server = server.start();
    let client = RemotingClient::new(ClientConfig::default());
    for _ in 0..3 {
        let rsp = client
            .invoke(&addr, RemotingCommand::request(HANG), RPC_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(rsp.code, SYSTEM_BUSY);
        assert!(
            rsp.remark.as_deref().unwrap_or_default().contains("busy"),
            "{:?}",
            rsp.remark
        );
    }
    assert_eq!(stats.system_busy_answers(), 3);
    assert_eq!(server.stats().system_busy_answers(), 3);
    assert_eq!(processed.load(Ordering::SeqCst), 0);
    // A oneway cannot be told to retry, so it is processed rather than refused (and dropped).
    client
        .invoke_oneway(&addr, RemotingCommand::request(HANG))
        .await
        .unwrap();
    guard("oneway processed despite flow control", async {
        while processed.load(Ordering::SeqCst) < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(stats.system_busy_answers(), 3);
    client.shutdown().await;
    server.shutdown().await;
}

/// Refuses requests carrying `deny`, stamps every response.
struct StampHook {
    before: AtomicUsize,
}

impl RpcHook for StampHook {
    fn before_request(
        &self,
        _: SocketAddr,
        request: &mut RemotingCommand,
    ) -> Result<(), Box<RemotingCommand>> {
        self.before.fetch_add(1, Ordering::SeqCst);
        if request.ext("deny").is_some() {
            return Err(Box::new(RemotingCommand::response(
                NO_PERMISSION,
                Some("denied".into()),
            )));
        }
        request.ext_mut().insert("signed", "yes");
        Ok(())
    }

    fn after_response(
        &self,
        _: SocketAddr,
        request: &RemotingCommand,
        response: &mut RemotingCommand,
    ) {
        let tag = request.ext("tag").unwrap_or("none").to_string();
        response.ext_mut().insert("stamped", tag);
    }
}

#[tokio::test]
async fn rpc_hooks_run_on_server_and_client() {
    let server_hook = Arc::new(StampHook {
        before: AtomicUsize::new(0),
    });
    let hook = server_hook.clone();
    let (server, addr) = start_default(move |s| s.add_rpc_hook(hook)).await;
    let client = RemotingClient::new(ClientConfig::default());

    let rsp = client
        .invoke(&addr, request(ECHO, SerializeType::Json, "t1"), RPC_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        rsp.ext("signed"),
        Some("yes"),
        "server hook modified the request"
    );
    assert_eq!(
        rsp.ext("stamped"),
        Some("t1"),
        "server hook modified the response"
    );

    let mut denied = request(ECHO, SerializeType::Json, "t2");
    denied.ext_mut().insert("deny", "1");
    let rsp = client
        .invoke(&addr, denied.clone(), RPC_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(rsp.code, NO_PERMISSION);
    assert_eq!(rsp.remark.as_deref(), Some("denied"));
    assert_eq!(server_hook.before.load(Ordering::SeqCst), 2);

    // On the client, a refusing hook stops the request before it is sent.
    let client_hook = Arc::new(StampHook {
        before: AtomicUsize::new(0),
    });
    client.add_rpc_hook(client_hook.clone());
    let err = client.invoke(&addr, denied, RPC_TIMEOUT).await.unwrap_err();
    assert!(
        matches!(
            err,
            RemotingError::Rejected {
                code: NO_PERMISSION,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        server_hook.before.load(Ordering::SeqCst),
        2,
        "nothing reached the server"
    );
    client.shutdown().await;
    server.shutdown().await;
}

#[derive(Default)]
struct CountingListener {
    connected: AtomicUsize,
    closed: AtomicUsize,
    idle: AtomicUsize,
    exceptions: AtomicUsize,
}

impl ChannelEventListener for CountingListener {
    fn on_connect(&self, _: &Channel) {
        self.connected.fetch_add(1, Ordering::SeqCst);
    }
    fn on_close(&self, _: &Channel) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
    fn on_idle(&self, _: &Channel) {
        self.idle.fetch_add(1, Ordering::SeqCst);
    }
    fn on_exception(&self, _: &Channel, _: &RemotingError) {
        self.exceptions.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn idle_connection_is_closed_and_events_fire() {
    let listener = Arc::new(CountingListener::default());
    let events = listener.clone();
    let (server, addr) = start(
        ServerConfig {
            idle_timeout: Some(IDLE_TIMEOUT),
            ..ServerConfig::new("127.0.0.1:0")
        },
        move |s| s.set_channel_event_listener(events),
    )
    .await;
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let mut buf = BytesMut::new();
    assert!(
        guard("idle close", read_raw(&mut silent, &mut buf))
            .await
            .is_none()
    );

    let mut bad = TcpStream::connect(&addr).await.unwrap();
    bad.write_all(&[0, 0, 0, 1, 0]).await.unwrap(); // frame length 1: too small
    assert!(
        guard("bad close", read_raw(&mut bad, &mut buf))
            .await
            .is_none()
    );

    server.shutdown().await;
    assert_eq!(listener.connected.load(Ordering::SeqCst), 2);
    assert_eq!(listener.idle.load(Ordering::SeqCst), 1);
    assert_eq!(listener.exceptions.load(Ordering::SeqCst), 1);
    assert_eq!(listener.closed.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_requests_then_refuses_connections() {
    let (started_tx, mut started_rx) = mpsc::unbounded_channel();
    let gate: Arc<Mutex<Option<oneshot::Receiver<()>>>> = Arc::new(Mutex::new(None));
    let (release_tx, release_rx) = oneshot::channel();
    *gate.lock() = Some(release_rx);
    let gate_in = gate.clone();
    let (server, addr) = start_default(move |s| {
        s.register(
            HANG,
            processor(move |_, _| {
                let started = started_tx.clone();
                let release = gate_in.lock().take();
                async move {
                    let _ = started.send(());
                    if let Some(release) = release {
                        let _ = release.await;
                    }
                    Some(RemotingCommand::response(SUCCESS, Some("finished".into())))
                }
                .boxed()
            }),
        )
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let in_flight = tokio::spawn({
        let client = client.clone();
        let addr = addr.clone();
        async move {
            client
                .invoke(
                    &addr,
                    RemotingCommand::request(HANG),
                    Duration::from_secs(10),
                )
                .await
        }
    });
    guard("request started", started_rx.recv()).await.unwrap();
    server.begin_shutdown();
    let stopping = tokio::spawn(server.shutdown());
    release_tx.send(()).unwrap();
    let rsp = guard("in-flight request", in_flight)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rsp.remark.as_deref(), Some("finished"));
    guard("shutdown", stopping).await.unwrap();
    assert!(
        TcpStream::connect(&addr).await.is_err(),
        "listener is closed"
    );
    let err = client
        .invoke(&addr, RemotingCommand::request(ECHO), RPC_TIMEOUT)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RemotingError::ConnectFailed { .. } | RemotingError::ConnectionClosed { .. }
        ),
        "{err:?}"
    );
    client.shutdown().await;
}

#[tokio::test]
async fn shutdown_is_bounded_when_a_request_never_finishes() {
    let (server, addr) = start(
        ServerConfig {
            shutdown_grace: Duration::from_millis(100),
            ..ServerConfig::new("127.0.0.1:0")
        },
        |s| s.register(HANG, hanging()),
    )
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    // Make sure the connection exists and the hanging request reached the server.
    client
        .invoke(
            &addr,
            request(ECHO, SerializeType::Json, "warm"),
            RPC_TIMEOUT,
        )
        .await
        .unwrap();
    let pending = tokio::spawn({
        let client = client.clone();
        let addr = addr.clone();
        async move {
            client
                .invoke(
                    &addr,
                    RemotingCommand::request(HANG),
                    Duration::from_secs(30),
                )
                .await
        }
    });
    guard("server shutdown", server.shutdown()).await;
    let result = guard("pending invoke", pending).await.unwrap();
    assert!(
        matches!(result, Err(RemotingError::ConnectionClosed { .. })),
        "{result:?}"
    );
    client.shutdown().await;
}

#[tokio::test]
async fn connect_failure_and_shutdown_errors() {
    // A port that nothing listens on: bind, note it, release it.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let client = RemotingClient::new(ClientConfig::default());
    let calls = (0..3).map(|_| client.invoke(&addr, RemotingCommand::request(ECHO), RPC_TIMEOUT));
    for result in futures::future::join_all(calls).await {
        assert!(
            matches!(result, Err(RemotingError::ConnectFailed { .. })),
            "{result:?}"
        );
    }
    assert!(client.channel(&addr).is_none());
    client.shutdown().await;
    let err = client
        .invoke(&addr, RemotingCommand::request(ECHO), RPC_TIMEOUT)
        .await
        .unwrap_err();
    assert!(matches!(err, RemotingError::Shutdown), "{err:?}");
}

#[tokio::test]
async fn invoke_async_delivers_to_callback() {
    let (server, addr) = start_default(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let (tx, rx) = oneshot::channel();
    client.invoke_async(
        &addr,
        request(ECHO, SerializeType::Json, "async"),
        RPC_TIMEOUT,
        move |result| {
            let _ = tx.send(result);
        },
    );
    let rsp = guard("callback", rx).await.unwrap().unwrap();
    assert_eq!(rsp.ext("tag"), Some("async"));
    client.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn in_flight_bound_stops_reading_until_a_request_finishes() {
    let (started_tx, mut started_rx) = mpsc::unbounded_channel::<oneshot::Sender<()>>();
    let (server, addr) = start(
        ServerConfig {
            max_in_flight_per_connection: 2,
            ..ServerConfig::new("127.0.0.1:0")
        },
        move |s| {
            s.register(
                HANG,
                processor(move |_, _| {
                    let (release_tx, release_rx) = oneshot::channel();
                    let _ = started_tx.send(release_tx);
                    async move {
                        let _ = release_rx.await;
                        Some(RemotingCommand::response(SUCCESS, None))
                    }
                    .boxed()
                }),
            )
        },
    )
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let client = client.clone();
            let addr = addr.clone();
            tokio::spawn(async move {
                client
                    .invoke(
                        &addr,
                        RemotingCommand::request(HANG),
                        Duration::from_secs(10),
                    )
                    .await
            })
        })
        .collect();
    let first = guard("first", started_rx.recv()).await.unwrap();
    let second = guard("second", started_rx.recv()).await.unwrap();
    // The third request is on the wire, but the server must not read it while two are running.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), started_rx.recv())
            .await
            .is_err(),
        "a third request was processed beyond the in-flight bound"
    );
    first.send(()).unwrap();
    let third = guard("third", started_rx.recv()).await.unwrap();
    second.send(()).unwrap();
    third.send(()).unwrap();
    for call in calls {
        assert_eq!(guard("call", call).await.unwrap().unwrap().code, SUCCESS);
    }
    client.shutdown().await;
    server.shutdown().await;
}

/// Counts its calls; fails the next `fail` of them.
#[derive(Default)]
struct Gate {
    settled: AtomicUsize,
    fail: AtomicUsize,
}

impl ResponseFence for Gate {
    fn settle(&self) -> Result<Settled, String> {
        self.settled.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match failing {
            Ok(_) => Err("the disk is gone".to_owned()),
            Err(_) => Ok(Settled::default()),
        }
    }
}

/// The fence runs before a response is written (it has run by the time the response arrives),
/// and one that fails keeps the responses from leaving: the connection is closed unanswered,
/// and the server goes on serving once it passes again.
#[tokio::test]
async fn response_fence_runs_before_each_write_and_a_failing_one_closes_unanswered() {
    let gate = Arc::new(Gate::default());
    let fence = Arc::clone(&gate);
    let (server, addr) = start_default(move |s| s.set_response_fence(fence)).await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let mut buf = BytesMut::new();
    let mut req = request(ECHO, SerializeType::Json, "fenced");
    req.opaque = 1;
    write_raw(&mut stream, &req).await;
    let rsp = guard("fenced echo", read_raw(&mut stream, &mut buf))
        .await
        .unwrap();
    assert_eq!(rsp.opaque, 1);
    let settled = gate.settled.load(Ordering::SeqCst);
    assert!(settled >= 1, "answered before the fence ran");

    gate.fail.store(1, Ordering::SeqCst);
    req.opaque = 2;
    write_raw(&mut stream, &req).await;
    assert_closed_then_served(stream, &addr).await;
    assert!(gate.settled.load(Ordering::SeqCst) >= settled + 2);
    server.shutdown().await;
}

const HELD: i32 = 103;
const FLUSH_DISK_TIMEOUT: i32 = 10;

/// Releases held responses up to the value its test sends; counts the expired ones.
struct Releaser {
    released: tokio::sync::watch::Sender<u64>,
    hold_timeout: Duration,
    expired: Mutex<Vec<u64>>,
}

impl ResponseFence for Releaser {
    fn settle(&self) -> Result<Settled, String> {
        Ok(Settled::default())
    }

    fn released(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.released.subscribe())
    }

    fn hold_timeout(&self) -> Duration {
        self.hold_timeout
    }

    fn on_hold_expired(&self, until: u64) {
        self.expired.lock().push(until);
    }
}

/// Answers at once, held until the position in the request's `until` field.
fn holding() -> Arc<dyn RequestProcessor> {
    processor(|_, req| {
        async move {
            let until = req
                .ext_fields
                .as_ref()
                .and_then(|e| e.get("until"))
                .and_then(|v| v.parse().ok());
            let mut rsp = RemotingCommand::response(SUCCESS, None);
            rsp.ext_mut().insert("msgId", "M1");
            rsp.hold = until.map(hold_until);
            Some(rsp)
        }
        .boxed()
    })
}

fn hold_until(until: u64) -> comet_protocol::ResponseHold {
    comet_protocol::ResponseHold {
        until,
        expired_code: FLUSH_DISK_TIMEOUT,
    }
}

fn held_request(opaque: i32, until: Option<u64>) -> RemotingCommand {
    let mut req = request(HELD, SerializeType::Json, "held");
    req.opaque = opaque;
    if let Some(until) = until {
        req.ext_mut().insert("until", until.to_string());
    }
    req
}

/// A held response leaves only once the fence released its position (what a SYNC_FLUSH send
/// does with the flushed offset), without holding up the unheld responses behind it; one held
/// past the fence's timeout leaves with its expired code and the rest of its header.
#[tokio::test]
async fn held_responses_wait_for_the_fence_and_expire_with_their_code() {
    let fence = Arc::new(Releaser {
        released: tokio::sync::watch::Sender::new(0),
        hold_timeout: Duration::from_millis(300),
        expired: Mutex::new(Vec::new()),
    });
    let setup_fence = Arc::clone(&fence);
    let (server, addr) = start_default(move |s| {
        s.register(HELD, holding());
        s.set_response_fence(setup_fence);
    })
    .await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let mut buf = BytesMut::new();

    // Held for 5, then an unheld one: the unheld one is answered first.
    write_raw(&mut stream, &held_request(1, Some(5))).await;
    write_raw(&mut stream, &held_request(2, None)).await;
    let first = guard("unheld answer", read_raw(&mut stream, &mut buf))
        .await
        .unwrap();
    assert_eq!((first.opaque, first.code), (2, SUCCESS));
    fence.released.send_replace(4);
    write_raw(&mut stream, &held_request(3, Some(4))).await;
    let next = guard("answer released at 4", read_raw(&mut stream, &mut buf))
        .await
        .unwrap();
    assert_eq!(
        (next.opaque, next.code),
        (3, SUCCESS),
        "only the response held for 4 was released"
    );
    fence.released.send_replace(5);
    let released = guard("answer released at 5", read_raw(&mut stream, &mut buf))
        .await
        .unwrap();
    assert_eq!((released.opaque, released.code), (1, SUCCESS));
    assert!(fence.expired.lock().is_empty());

    // Never released: after the hold timeout it leaves as FLUSH_DISK_TIMEOUT, header kept.
    write_raw(&mut stream, &held_request(4, Some(1_000))).await;
    let expired = guard("expired answer", read_raw(&mut stream, &mut buf))
        .await
        .unwrap();
    assert_eq!((expired.opaque, expired.code), (4, FLUSH_DISK_TIMEOUT));
    assert_eq!(expired.flag & FLAG_RESPONSE, FLAG_RESPONSE);
    assert_eq!(
        expired.ext_fields.as_ref().and_then(|e| e.get("msgId")),
        Some("M1")
    );
    assert_eq!(*fence.expired.lock(), [1_000]);
    server.shutdown().await;
}

/// Releases on the writer's own call: what a broker writer running the SYNC_FLUSH group commit
/// for its held answers does. Records each call's `held`.
struct ReleasesHere {
    released: tokio::sync::watch::Sender<u64>,
    calls: Mutex<Vec<bool>>,
}

impl ResponseFence for ReleasesHere {
    fn settle(&self) -> Result<Settled, String> {
        Ok(Settled::default())
    }

    fn released(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.released.subscribe())
    }

    fn release(&self, held: bool) {
        self.calls.lock().push(held);
        if held {
            self.released.send_replace(100);
        }
    }

    fn hold_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
}

/// The writer tells the fence whether responses wait for it, and one the fence releases during
/// that call leaves in the same turn: nobody else ever moves the position here, and the hold
/// timeout is far off.
#[tokio::test]
async fn a_fence_may_release_held_responses_on_the_writers_call() {
    let fence = Arc::new(ReleasesHere {
        released: tokio::sync::watch::Sender::new(0),
        calls: Mutex::new(Vec::new()),
    });
    let setup_fence = Arc::clone(&fence);
    let (server, addr) = start_default(move |s| {
        s.register(HELD, holding());
        s.set_response_fence(setup_fence);
    })
    .await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let mut buf = BytesMut::new();

    write_raw(&mut stream, &held_request(1, None)).await;
    let plain = guard("unheld answer", read_raw(&mut stream, &mut buf))
        .await
        .unwrap();
    assert_eq!((plain.opaque, plain.code), (1, SUCCESS));
    assert_eq!(*fence.calls.lock(), [false], "nothing held: told so");

    write_raw(&mut stream, &held_request(2, Some(7))).await;
    let held = guard(
        "answer released by the writer's call",
        read_raw(&mut stream, &mut buf),
    )
    .await
    .unwrap();
    assert_eq!((held.opaque, held.code), (2, SUCCESS));
    assert_eq!(*fence.calls.lock(), [false, true]);
    server.shutdown().await;
}

#[tokio::test]
async fn a_request_answered_in_http_fails_saying_so() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr").to_string();
    // An HTTP server's answer to bytes it cannot parse.
    tokio::spawn(async move {
        if let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 64];
            let _ = stream.read(&mut buf).await;
            let _ = stream
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
            let _ = stream.shutdown().await;
        }
    });
    let client = RemotingClient::new(ClientConfig::default());
    let outcome = guard(
        "invoke",
        client.invoke(&addr, request(ECHO, SerializeType::Json, "x"), GUARD),
    )
    .await;
    assert!(
        matches!(
            outcome,
            Err(RemotingError::Protocol(
                comet_protocol::ProtocolError::HttpPeer
            ))
        ),
        "{outcome:?}"
    );
    client.shutdown().await;
}
