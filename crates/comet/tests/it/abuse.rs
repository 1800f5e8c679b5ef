//! Protocol abuse against a real `comet serve` child process: garbage, truncated frames, frames
//! announcing huge lengths, well-formed frames with absurd header values, a thousand connections
//! that never send, and slow readers that pipeline requests without ever reading a response.
//!
//! A broker is only trustworthy if one bad peer cannot take it down or starve the others, so the
//! test asserts what a well-behaved client sees rather than internals: the process stays up, a
//! probe client keeps getting answers during every phase (its round-trip times are printed, not
//! asserted: timing on a shared 2-core CI machine is not a correctness property), every complete
//! bad frame gets an answer or a closed connection (never silence), and the broker's resident
//! memory, read from `/proc/<pid>/status`, stays under a generous bound — and, while slow readers
//! are held, grows by no more than their byte-bounded write queues explain. A separate test sets
//! `serverChannelMaxIdleTimeSeconds` through `--set` and waits for silent connections to both
//! listeners to be closed. Run with `--nocapture` to see the per-phase figures.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::frame;
use comet_protocol::headers::{
    PullMessageRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2, pull_sys_flag,
    request_with_header,
};
use comet_protocol::limits::MAX_FRAME_LEN;
use comet_protocol::{ExtFields, RemotingCommand};
use comet_remoting::{ClientConfig, RemotingClient};
use comet_testkit::process::{self, ServeOutput};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOPIC: &str = "AbuseTopic";
const GROUP: &str = "abuse_group";
const RPC: Duration = Duration::from_secs(10);
/// Hang guard for anything this test waits for.
const DEADLINE: Duration = Duration::from_secs(60);
/// How long a bad peer waits for the broker's answer or close before calling it silence (no
/// verdict is expected to be silence, so only a failing run waits this long; generous for a
/// loaded CI box).
const VERDICT_TIMEOUT: Duration = Duration::from_secs(30);
/// Each phase keeps abusing for at least this long, so the probe overlaps it.
const MIN_PHASE: Duration = Duration::from_secs(2);
/// Probe answers required while each phase is under way.
const MIN_PROBES_PER_PHASE: usize = 3;
/// Connections that connect and never send a byte.
const SILENT_CONNECTIONS: usize = 1000;
/// Connections that pipeline requests and never read.
const SLOW_READERS: usize = 8;
/// Requests each slow reader tries to write (it stops when the broker stops reading).
const SLOW_READER_REQUESTS: usize = 5000;
/// A write that makes no progress for this long means the broker stopped reading: back-pressure.
const STALLED_WRITE: Duration = Duration::from_secs(2);
/// How long the slow readers and silent connections are held open while the probe runs.
const HOLD: Duration = Duration::from_secs(6);
/// Generous bound on the broker's peak resident memory.
const MAX_RSS_KIB: u64 = 512 * 1024;
/// The broker's `writeBufferHighWaterMark` (its default): unsent response bytes per connection
/// at which it stops reading that connection.
const WRITE_HIGH_WATER_KIB: u64 = 4 * 1024;
/// Requests one connection may have read and not finished (`DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION`):
/// while a slow reader's responses are over the mark, requests already read wait unprocessed.
const MAX_IN_FLIGHT_PER_CONNECTION: u64 = 4096;
/// Generous memory of one request held unprocessed: its ~300-byte frame, decoded header map and
/// task.
const HELD_REQUEST_KIB: u64 = 2;
/// Allocator slack and everything else the phase touches (read buffers, tasks, store pages).
const SLOW_READER_SLACK_KIB: u64 = 48 * 1024;
/// Bound on the broker's memory growth while the slow readers are held: per slow connection,
/// the unsent responses (the high-water mark, plus one response's overshoot, well under 1 MiB)
/// and the requests held back unprocessed, plus slack. Before the byte bound the same phase grew
/// the broker by over 600 MiB.
const MAX_SLOW_READER_GROWTH_KIB: u64 = SLOW_READERS as u64
    * (WRITE_HIGH_WATER_KIB + 1024 + MAX_IN_FLIGHT_PER_CONNECTION * HELD_REQUEST_KIB)
    + SLOW_READER_SLACK_KIB;
/// Lines of the broker log shown when it died.
const LOG_TAIL_LINES: usize = 30;
/// `serverChannelMaxIdleTimeSeconds` of the idle-timeout test.
const IDLE_TIMEOUT_SECS: u64 = 1;
/// How long the idle-timeout test waits for a silent connection to be closed.
const IDLE_CLOSE_DEADLINE: Duration = Duration::from_secs(20);
/// Messages stored before the slow-reader phase, so pulls return real bodies.
const PRELOAD_MESSAGES: usize = 256;

/// A `comet serve` child (killed when dropped), and where its log is.
struct Serve {
    process: process::Serve,
    broker: String,
    namesrv: String,
    log: PathBuf,
}

impl Serve {
    fn pid(&self) -> u32 {
        self.process.child.id()
    }

    fn alive(&mut self) -> bool {
        matches!(self.process.child.try_wait(), Ok(None))
    }

    /// The last lines of the broker's log, for failure messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        // A panic's message is more useful than the end of its backtrace.
        let start = lines
            .iter()
            .position(|l| l.contains("stack backtrace") || l.contains("panicked at"))
            .map(|i| i.saturating_sub(5))
            .unwrap_or(lines.len().saturating_sub(LOG_TAIL_LINES));
        lines
            .iter()
            .skip(start)
            .take(LOG_TAIL_LINES)
            .copied()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Starts `comet serve` in `data` with `sets` as extra `--set key=value` overrides.
fn spawn_serve(data: &Path, sets: &[&str]) -> Serve {
    let mut args = vec!["--set", "mappedFileSizeCommitLog=16777216"];
    args.extend(sets.iter().flat_map(|set| ["--set", set]));
    let log = data.join("serve.log");
    let process = process::Serve::spawn(
        env!("CARGO_BIN_EXE_comet"),
        data,
        &data.join("ready.json"),
        &args,
        ServeOutput::Log {
            path: log.clone(),
            append: false,
        },
        DEADLINE,
    );
    Serve {
        broker: process.broker.clone(),
        namesrv: process.namesrv.clone(),
        process,
        log,
    }
}

/// `(VmRSS, VmHWM)` of `pid` in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn send_request(topic: &str, queue_id: i32, body: Bytes) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "abuse_producer".to_owned(),
        topic: topic.to_owned(),
        default_topic: "TBW102".to_owned(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: 0,
        born_timestamp: now_ms(),
        flag: 0,
        properties: Some("WAIT\u{1}true\u{2}".to_owned()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: None,
        max_reconsume_times: None,
        rpc: Default::default(),
    });
    request_with_header(RequestCode::SendMessageV2, &header).with_body(body)
}

fn pull_request(queue_id: i32, queue_offset: i64, max_msg_nums: i32) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: GROUP.to_owned(),
        topic: TOPIC.to_owned(),
        queue_id,
        queue_offset,
        max_msg_nums,
        sys_flag: pull_sys_flag::build(false, false, true, false),
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_owned()),
        sub_version: now_ms(),
        expression_type: Some("TAG".to_owned()),
        ..Default::default()
    };
    request_with_header(RequestCode::PullMessage, &header)
}

fn encode(cmd: &RemotingCommand) -> Bytes {
    frame::encode_to_bytes(cmd).expect("encodable request")
}

/// What a bad peer observed after writing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The broker answered with a response carrying this code.
    Answered(i32),
    /// The broker closed (or reset) the connection.
    Closed,
    /// Neither within [`VERDICT_TIMEOUT`].
    Silent,
}

/// Writes `bytes` on a fresh connection (half-closing the write side when `then_close` is set)
/// and reports whether the broker answered, closed or stayed silent.
async fn verdict(addr: &str, bytes: &[u8], then_close: bool) -> Verdict {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return Verdict::Closed;
    };
    if stream.write_all(bytes).await.is_err() {
        return Verdict::Closed;
    }
    if then_close {
        let _ = stream.shutdown().await;
    }
    let mut buf = BytesMut::with_capacity(4096);
    let deadline = tokio::time::Instant::now() + VERDICT_TIMEOUT;
    loop {
        match frame::decode_frame(&mut buf) {
            Ok(Some(rsp)) => return Verdict::Answered(rsp.code),
            Ok(None) => {}
            Err(e) => panic!("the broker wrote an undecodable frame: {e}"),
        }
        match tokio::time::timeout_at(deadline, stream.read_buf(&mut buf)).await {
            Err(_) => return Verdict::Silent,
            Ok(Ok(0)) | Ok(Err(_)) => return Verdict::Closed,
            Ok(Ok(_)) => {}
        }
    }
}

/// A well-behaved client sending one message at a time for as long as the test runs, recording
/// the round-trip time of every answer under the current phase.
struct Probe {
    phase: AtomicUsize,
    stop: AtomicBool,
    /// `(phase, rtt)` of every answered probe.
    answers: Mutex<Vec<(usize, Duration)>>,
    failures: AtomicUsize,
}

impl Probe {
    fn answers_in(&self, phase: usize) -> usize {
        self.answers
            .lock()
            .iter()
            .filter(|(p, _)| *p == phase)
            .count()
    }

    async fn run(self: Arc<Self>, addr: String) {
        let client = RemotingClient::new(ClientConfig::default());
        let mut i = 0_i32;
        while !self.stop.load(Ordering::Relaxed) {
            let phase = self.phase.load(Ordering::Relaxed);
            let started = Instant::now();
            let request = send_request(TOPIC, i % 4, Bytes::from_static(b"probe"));
            match client.invoke(&addr, request, RPC).await {
                Ok(rsp) if rsp.code == i32::from(ResponseCode::Success) => {
                    self.answers.lock().push((phase, started.elapsed()));
                }
                _ => {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                }
            }
            i = i.wrapping_add(1);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn report(&self, phase: usize, name: &str) {
        let mut rtts: Vec<Duration> = self
            .answers
            .lock()
            .iter()
            .filter(|(p, _)| *p == phase)
            .map(|(_, d)| *d)
            .collect();
        rtts.sort();
        let pick = |q: f64| {
            let idx = ((rtts.len() as f64 - 1.0) * q).round() as usize;
            rtts.get(idx).copied().unwrap_or_default()
        };
        println!(
            "phase {phase} {name:<18} probe answers {:>4}  rtt p50 {:>8.2?} p99 {:>8.2?} max {:>8.2?}",
            rtts.len(),
            pick(0.5),
            pick(0.99),
            pick(1.0)
        );
    }
}

/// Deterministic byte stream for the garbage phase (xorshift64*).
struct Garbage(u64);

impl Garbage {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// A JSON-header frame built by hand, so header values can be what no encoder would write.
fn raw_json_frame(header: &[u8], body: &[u8]) -> Vec<u8> {
    let total = 4 + header.len() + body.len();
    let mut out = Vec::with_capacity(4 + total);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}

/// Runs `abuse` repeatedly for at least [`MIN_PHASE`] and until the probe has answered
/// [`MIN_PROBES_PER_PHASE`] times during the phase.
async fn phase<F, Fut>(probe: &Probe, serve: &mut Serve, index: usize, name: &str, mut abuse: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    probe.phase.store(index, Ordering::Relaxed);
    let started = Instant::now();
    loop {
        abuse().await;
        if started.elapsed() >= MIN_PHASE && probe.answers_in(index) >= MIN_PROBES_PER_PHASE {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "phase {name}: the probe got only {} answers",
            probe.answers_in(index)
        );
    }
    assert!(
        serve.alive(),
        "comet serve died during phase {name}; log:\n{}",
        serve.log_tail()
    );
    let (rss, hwm) = rss_kib(serve.pid());
    probe.report(index, name);
    println!("        RSS {rss} KiB, peak {hwm} KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn broker_survives_protocol_abuse() {
    abuse(false).await;
}

/// Eight connections pipeline pulls and sends without ever reading: each connection's unsent
/// responses are bounded in bytes (`writeBufferHighWaterMark`), so the broker stops reading them
/// and its memory growth stays under [`MAX_SLOW_READER_GROWTH_KIB`].
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_readers_keep_broker_memory_bounded() {
    abuse(true).await;
}

/// `serverChannelMaxIdleTimeSeconds` set through `comet serve --set` closes silent connections
/// on both listeners after that long, and not before; a connection that keeps talking stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_close_after_the_configured_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let idle = Duration::from_secs(IDLE_TIMEOUT_SECS);
    let serve = spawn_serve(
        dir.path(),
        &[&format!(
            "serverChannelMaxIdleTimeSeconds={IDLE_TIMEOUT_SECS}"
        )],
    );
    let client = RemotingClient::new(ClientConfig {
        idle_timeout: None,
        ..ClientConfig::default()
    });
    let mut silent = Vec::new();
    for addr in [&serve.broker, &serve.namesrv] {
        // The clock starts before the connect: the server may accept (and start its idle timer)
        // before this task sees the connect complete, so only an instant taken earlier is a
        // lower bound for the server's start.
        let connecting = Instant::now();
        let stream = TcpStream::connect(addr.as_str())
            .await
            .expect("silent connect");
        silent.push((addr.clone(), connecting, stream));
    }
    // A talking connection: a request every half timeout keeps it open past the timeout.
    let talk = async {
        let started = Instant::now();
        while started.elapsed() < idle * 3 {
            let rsp = client
                .invoke(
                    &serve.broker,
                    send_request(TOPIC, 0, Bytes::from_static(b"alive")),
                    RPC,
                )
                .await
                .expect("talking connection served");
            assert_eq!(rsp.code, i32::from(ResponseCode::Success));
            tokio::time::sleep(idle / 2).await;
        }
        client
            .channel(&serve.broker)
            .expect("talking connection still open")
    };
    let watch = async {
        for (addr, connected, mut stream) in silent {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(IDLE_CLOSE_DEADLINE, stream.read(&mut byte))
                .await
                .unwrap_or_else(|_| panic!("{addr}: idle connection still open"));
            assert!(
                matches!(read, Ok(0) | Err(_)),
                "{addr}: expected a close, got {read:?}"
            );
            let elapsed = connected.elapsed();
            assert!(
                elapsed >= idle,
                "{addr}: closed after {elapsed:?}, before the {idle:?} idle timeout"
            );
            println!("{addr}: idle connection closed after {elapsed:?}");
        }
    };
    let (talking, ()) = tokio::join!(talk, watch);
    assert!(talking.is_active());
    client.shutdown().await;
    drop(serve);
}

/// Every phase in order; the slow-reader phase only with `with_slow_readers`.
async fn abuse(with_slow_readers: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut serve = spawn_serve(dir.path(), &[]);
    let addr = serve.broker.clone();
    let client = RemotingClient::new(ClientConfig::default());
    let padding = Bytes::from(vec![b'p'; 512]);
    for i in 0..PRELOAD_MESSAGES {
        let rsp = client
            .invoke(
                &addr,
                send_request(TOPIC, (i % 4) as i32, padding.clone()),
                RPC,
            )
            .await
            .expect("preload send");
        assert_eq!(
            rsp.code,
            i32::from(ResponseCode::Success),
            "preload send {i}"
        );
    }
    let (rss_before, _) = rss_kib(serve.pid());
    println!("broker RSS after preload: {rss_before} KiB");

    let probe = Arc::new(Probe {
        phase: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        answers: Mutex::new(Vec::new()),
        failures: AtomicUsize::new(0),
    });
    let probe_task = tokio::spawn(Arc::clone(&probe).run(addr.clone()));

    // 1. Garbage: random bytes of random lengths, then half-close.
    let mut garbage = Garbage(0x0BAD_F00D_DEAD_BEEF);
    phase(&probe, &mut serve, 1, "garbage", || {
        let chunks: Vec<Vec<u8>> = (0..50)
            .map(|_| {
                let len = (garbage.next() % 65_536) as usize;
                garbage.bytes(len)
            })
            .collect();
        let addr = addr.clone();
        async move {
            for chunk in chunks {
                // A random prefix may announce a frame longer than what follows; the half-close
                // then leaves it truncated, which must close the connection too.
                let v = verdict(&addr, &chunk, true).await;
                assert_ne!(
                    v,
                    Verdict::Silent,
                    "garbage of {} bytes got silence",
                    chunk.len()
                );
            }
        }
    })
    .await;

    // 2. Truncated frames: every prefix length of a real send frame, then half-close.
    let whole = encode(&send_request(TOPIC, 0, Bytes::from_static(b"truncated")));
    phase(&probe, &mut serve, 2, "truncated", || {
        let addr = addr.clone();
        let whole = whole.clone();
        async move {
            for cut in (1..whole.len()).step_by(7) {
                let v = verdict(&addr, whole.get(..cut).unwrap_or_default(), true).await;
                assert_eq!(v, Verdict::Closed, "frame cut at {cut} of {}", whole.len());
            }
        }
    })
    .await;

    // 3. Frames announcing huge lengths (and lying header lengths) while the connection stays
    // open: anything over the frame limit must be refused at once, not buffered.
    phase(&probe, &mut serve, 3, "huge lengths", || {
        let addr = addr.clone();
        async move {
            let over = (MAX_FRAME_LEN + 1) as u32;
            for len in [u32::MAX, i32::MAX as u32, 0x8000_0000, over] {
                let v = verdict(&addr, &len.to_be_bytes(), false).await;
                assert_eq!(v, Verdict::Closed, "announced length {len:#x}");
            }
            // Header length larger than the frame; unknown serialize type; frame shorter than
            // its own header-length field.
            let lying_header = [0, 0, 0, 8, 0x00, 0xFF, 0xFF, 0xFF, b'{', b'}', 0, 0];
            let unknown_ser = [0, 0, 0, 6, 0x7F, 0, 0, 2, b'{', b'}'];
            let too_small = [0, 0, 0, 2, 0, 0];
            for (name, bytes) in [
                ("header longer than frame", &lying_header[..]),
                ("unknown serialize type", &unknown_ser[..]),
                ("frame too small", &too_small[..]),
            ] {
                let v = verdict(&addr, bytes, false).await;
                assert!(
                    matches!(v, Verdict::Closed | Verdict::Answered(_)),
                    "{name}: {v:?}"
                );
            }
        }
    })
    .await;

    // 4. Well-formed frames with absurd header values: each gets an answer or a close.
    let big_topic = "T".repeat(1024 * 1024);
    phase(&probe, &mut serve, 4, "absurd headers", || {
        let addr = addr.clone();
        let big_topic = big_topic.clone();
        async move {
            let mut requests: Vec<(&str, Vec<u8>)> = vec![
                ("send queueId -1", encode(&send_request(TOPIC, -1, Bytes::from_static(b"x"))).to_vec()),
                ("send queueId MAX", encode(&send_request(TOPIC, i32::MAX, Bytes::from_static(b"x"))).to_vec()),
                ("send queueId MIN", encode(&send_request(TOPIC, i32::MIN, Bytes::from_static(b"x"))).to_vec()),
                ("pull maxMsgNums MAX", encode(&pull_request(0, 0, i32::MAX)).to_vec()),
                ("pull maxMsgNums -5", encode(&pull_request(0, 0, -5)).to_vec()),
                ("pull queueOffset MIN", encode(&pull_request(0, i64::MIN, 32)).to_vec()),
                ("pull queueId -7", encode(&pull_request(-7, 0, 32)).to_vec()),
                ("unknown request code", encode(&RemotingCommand::request(987_654)).to_vec()),
            ];
            let mut no_fields = RemotingCommand::request(RequestCode::SendMessageV2);
            no_fields = no_fields.with_body(Bytes::from_static(b"x"));
            requests.push(("send without header", encode(&no_fields).to_vec()));
            let mut many = ExtFields::new();
            for i in 0..4000 {
                many.insert(format!("k{i}"), "v");
            }
            let crowded = RemotingCommand::request(RequestCode::SendMessageV2).with_ext_fields(many);
            requests.push(("4000 ext fields", encode(&crowded).to_vec()));
            let mut non_numeric = ExtFields::new();
            non_numeric.insert("a", "g");
            non_numeric.insert("b", TOPIC);
            non_numeric.insert("e", "NaN");
            let bad_number =
                RemotingCommand::request(RequestCode::SendMessageV2).with_ext_fields(non_numeric);
            requests.push(("queueId NaN", encode(&bad_number).to_vec()));
            let non_utf8 = raw_json_frame(
                b"{\"code\":310,\"extFields\":{\"a\":\"g\",\"b\":\"\xff\xfe\xc0\",\"e\":\"0\"},\"flag\":0,\"language\":\"JAVA\",\"opaque\":1,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":479}",
                b"body",
            );
            requests.push(("non-UTF-8 topic", non_utf8));
            for (name, bytes) in requests {
                let v = verdict(&addr, &bytes, false).await;
                assert_ne!(v, Verdict::Silent, "{name}");
            }
            for (name, topic) in [("1 MiB topic", big_topic.as_str()), ("empty topic", "")] {
                let bytes = encode(&send_request(topic, 0, Bytes::from_static(b"x")));
                let v = verdict(&addr, &bytes, false).await;
                assert!(
                    matches!(v, Verdict::Closed)
                        || matches!(v, Verdict::Answered(c) if c != i32::from(ResponseCode::Success)),
                    "{name} must be refused: {v:?}"
                );
            }
        }
    })
    .await;

    // 5. A thousand connections that never send, held while the probe runs.
    let mut silent = Vec::with_capacity(SILENT_CONNECTIONS);
    for _ in 0..SILENT_CONNECTIONS {
        silent.push(TcpStream::connect(&addr).await.expect("silent connect"));
    }
    phase(&probe, &mut serve, 5, "1000 silent conns", || {
        tokio::time::sleep(Duration::from_millis(200))
    })
    .await;

    if with_slow_readers {
        // 6. Slow readers: pipeline pulls (each answered with up to 32 stored messages) and sends
        // without ever reading. The broker must stop reading them (back-pressure) instead of queueing
        // without bound; the silent connections are still open too.
        let (rss_before_slow, _) = rss_kib(serve.pid());
        let written = Arc::new(AtomicUsize::new(0));
        let mut readers = Vec::new();
        for r in 0..SLOW_READERS {
            let addr = addr.clone();
            let written = Arc::clone(&written);
            readers.push(tokio::spawn(async move {
                let mut stream = TcpStream::connect(&addr)
                    .await
                    .expect("slow reader connect");
                for i in 0..SLOW_READER_REQUESTS {
                    let mut request = if i % 2 == 0 {
                        pull_request((i % 4) as i32, 0, 32)
                    } else {
                        send_request(TOPIC, (i % 4) as i32, Bytes::from_static(b"slow"))
                    };
                    request.opaque = (r * SLOW_READER_REQUESTS + i) as i32;
                    let bytes = encode(&request);
                    match tokio::time::timeout(STALLED_WRITE, stream.write_all(&bytes)).await {
                        Ok(Ok(())) => {
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                        // Stalled (the broker stopped reading) or closed: either bounds the damage.
                        Ok(Err(_)) | Err(_) => break,
                    }
                }
                // Keep the connection open, unread, for the rest of the phase.
                tokio::time::sleep(HOLD).await;
                drop(stream);
            }));
        }
        let hold_started = Instant::now();
        let pid = serve.pid();
        let peak_during = Arc::new(AtomicU64::new(0));
        phase(&probe, &mut serve, 6, "slow readers", || {
            let peak = Arc::clone(&peak_during);
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                peak.fetch_max(rss_kib(pid).0, Ordering::Relaxed);
            }
        })
        .await;
        while hold_started.elapsed() < HOLD {
            tokio::time::sleep(Duration::from_millis(200)).await;
            peak_during.fetch_max(rss_kib(pid).0, Ordering::Relaxed);
        }
        for reader in readers {
            reader.await.expect("slow reader task");
        }
        // VmHWM covers every phase so far; growth measured from it over-estimates, never misses.
        let (_, hwm_after_slow) = rss_kib(pid);
        let growth = hwm_after_slow
            .max(peak_during.load(Ordering::Relaxed))
            .saturating_sub(rss_before_slow);
        println!(
            "slow readers wrote {} of {} requests (the rest stalled); RSS before {rss_before_slow} KiB, \
             peak while held {} KiB, growth {growth} KiB (bound {MAX_SLOW_READER_GROWTH_KIB} KiB)",
            written.load(Ordering::Relaxed),
            SLOW_READERS * SLOW_READER_REQUESTS,
            peak_during.load(Ordering::Relaxed)
        );
        assert!(
            growth < MAX_SLOW_READER_GROWTH_KIB,
            "slow readers grew the broker by {growth} KiB (bound {MAX_SLOW_READER_GROWTH_KIB} KiB)"
        );
    }
    drop(silent);

    // 7. Afterwards the broker still serves normally.
    phase(&probe, &mut serve, 7, "after", || {
        tokio::time::sleep(Duration::from_millis(200))
    })
    .await;
    probe.stop.store(true, Ordering::Relaxed);
    probe_task.await.expect("probe task");

    assert!(
        serve.alive(),
        "comet serve died; log:\n{}",
        serve.log_tail()
    );
    let (rss_after, hwm) = rss_kib(serve.pid());
    println!(
        "broker RSS before {rss_before} KiB, after {rss_after} KiB, peak {hwm} KiB; probe failures {}",
        probe.failures.load(Ordering::Relaxed)
    );
    assert!(hwm > 0, "could not read the broker's memory from /proc");
    assert!(
        hwm < MAX_RSS_KIB,
        "broker peak RSS {hwm} KiB exceeds the {MAX_RSS_KIB} KiB bound"
    );
}
