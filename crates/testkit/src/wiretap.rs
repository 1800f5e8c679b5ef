//! A recording relay between the clients and one broker, for tests that check *what* a consumer
//! sends and *when*: which pulls carry a subscription, how long a consumer waits between pulls,
//! which broker node it pulls from.
//!
//! The broker listens on `127.0.0.1:P` and announces `127.0.0.2:P` (`brokerIP1`) to the name
//! server; the relay listens on `127.0.0.2:P` and forwards every frame unchanged to the broker,
//! noting each request and response with the instant it passed. A rule can make the relay answer
//! the next requests of one code itself with an error, without forwarding them, to stand for a
//! broker that refuses them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::{RemotingCommand, frame};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex as AsyncMutex;
use tokio::task::JoinHandle;

/// The address brokers behind a relay announce; loopback, but not the address they bind.
pub const RELAY_IP: &str = "127.0.0.2";

/// One frame that passed the relay.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When the relay read the whole frame.
    pub at: Instant,
    /// Request code, or response code for a response.
    pub code: i32,
    pub opaque: i32,
    pub is_response: bool,
    /// The header's fields as text.
    pub fields: Vec<(String, String)>,
    /// Index of the client connection it passed on, in accept order.
    pub connection: usize,
}

impl Seen {
    /// The header field `key`, if present.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The header field `key` parsed as an integer; panics when missing, naming the frame.
    pub fn int(&self, key: &str) -> i64 {
        self.field(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("frame without integer field {key}: {self:?}"))
    }
}

#[derive(Debug)]
struct FailRule {
    code: i32,
    /// Only requests whose `topic` field is this one, if set.
    topic: Option<String>,
    remaining: usize,
    answer: i32,
}

#[derive(Default, Debug)]
struct State {
    seen: Vec<Seen>,
    fail: Vec<FailRule>,
    connections: usize,
}

/// A running relay; stops (and closes its connections) when dropped.
pub struct Wiretap {
    state: Arc<Mutex<State>>,
    accept: JoinHandle<()>,
    pub listen: SocketAddr,
}

impl Drop for Wiretap {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Wiretap {
    /// Relays `listen` to `upstream`. Binds before returning, so a client may connect at once.
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> Wiretap {
        let listener = TcpListener::bind(listen).await.expect("relay binds");
        let state = Arc::new(Mutex::new(State::default()));
        let accept_state = Arc::clone(&state);
        let accept = tokio::spawn(async move {
            let mut pumps = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(broker) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let connection = {
                    let mut s = accept_state.lock();
                    s.connections += 1;
                    s.connections - 1
                };
                let (client_read, client_write) = client.into_split();
                let (broker_read, broker_write) = broker.into_split();
                let client_write = Arc::new(AsyncMutex::new(client_write));
                pumps.spawn(to_broker(
                    client_read,
                    broker_write,
                    Arc::clone(&client_write),
                    Arc::clone(&accept_state),
                    connection,
                ));
                pumps.spawn(to_client(
                    broker_read,
                    client_write,
                    Arc::clone(&accept_state),
                    connection,
                ));
            }
        });
        Wiretap {
            state,
            accept,
            listen,
        }
    }

    /// Every request of `code` seen so far, in order.
    pub fn requests(&self, code: RequestCode) -> Vec<Seen> {
        let code = i32::from(code);
        self.state
            .lock()
            .seen
            .iter()
            .filter(|s| !s.is_response && s.code == code)
            .cloned()
            .collect()
    }

    /// Every request seen so far, in order.
    pub fn requests_all(&self) -> Vec<Seen> {
        self.state
            .lock()
            .seen
            .iter()
            .filter(|s| !s.is_response)
            .cloned()
            .collect()
    }

    /// The response to `request` (same connection and opaque), if it passed already.
    pub fn response_to(&self, request: &Seen) -> Option<Seen> {
        self.state
            .lock()
            .seen
            .iter()
            .find(|s| {
                s.is_response && s.opaque == request.opaque && s.connection == request.connection
            })
            .cloned()
    }

    /// Answers the next `times` requests of `code` with `answer` (remark "refused by the relay")
    /// instead of forwarding them.
    pub fn refuse(&self, code: RequestCode, times: usize, answer: ResponseCode) {
        self.push_rule(code, None, times, answer);
    }

    /// [`Self::refuse`] for the requests of one topic only.
    pub fn refuse_topic(&self, code: RequestCode, topic: &str, times: usize, answer: ResponseCode) {
        self.push_rule(code, Some(topic.to_owned()), times, answer);
    }

    fn push_rule(
        &self,
        code: RequestCode,
        topic: Option<String>,
        times: usize,
        answer: ResponseCode,
    ) {
        self.state.lock().fail.push(FailRule {
            code: i32::from(code),
            topic,
            remaining: times,
            answer: i32::from(answer),
        });
    }

    /// How many requests the refusal rules have still to answer.
    pub fn refusals_left(&self) -> usize {
        self.state.lock().fail.iter().map(|r| r.remaining).sum()
    }
}

fn note(state: &Mutex<State>, cmd: &RemotingCommand, connection: usize) {
    let fields = cmd
        .ext_fields
        .as_ref()
        .map(|f| {
            f.iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    state.lock().seen.push(Seen {
        at: Instant::now(),
        code: cmd.code,
        opaque: cmd.opaque,
        is_response: cmd.is_response(),
        fields,
        connection,
    });
}

/// Takes one whole frame (length prefix included) off `buf`, if buffered.
fn take_frame(buf: &mut BytesMut) -> Option<BytesMut> {
    if buf.len() < 4 {
        return None;
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    (buf.len() >= 4 + len).then(|| buf.split_to(4 + len))
}

/// Decodes a whole frame (length prefix included) for the record.
fn decode(raw: &BytesMut) -> Option<RemotingCommand> {
    frame::decode(raw.clone().split_off(4).freeze()).ok()
}

/// Whether a rule claims `cmd`; if so, the answer code.
fn refusal(state: &Mutex<State>, cmd: &RemotingCommand) -> Option<i32> {
    let mut s = state.lock();
    let topic = cmd.ext_fields.as_ref().and_then(|f| f.get("topic"));
    let rule = s.fail.iter_mut().find(|r| {
        r.code == cmd.code && r.remaining > 0 && r.topic.as_deref().is_none_or(|t| Some(t) == topic)
    })?;
    rule.remaining -= 1;
    Some(rule.answer)
}

async fn to_broker(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    client: Arc<AsyncMutex<OwnedWriteHalf>>,
    state: Arc<Mutex<State>>,
    connection: usize,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        while let Some(raw) = take_frame(&mut buf) {
            let Some(cmd) = decode(&raw) else {
                let _ = to.write_all(&raw).await;
                continue;
            };
            note(&state, &cmd, connection);
            if let Some(answer) = refusal(&state, &cmd) {
                let rsp =
                    RemotingCommand::response_to(&cmd, answer, Some("refused by the relay".into()));
                let mut out = BytesMut::new();
                if frame::encode(&rsp, &mut out).is_ok() {
                    note(&state, &rsp, connection);
                    let _ = client.lock().await.write_all(&out).await;
                }
                continue;
            }
            if to.write_all(&raw).await.is_err() {
                return;
            }
        }
        buf.reserve(64 * 1024);
        match from.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

async fn to_client(
    mut from: OwnedReadHalf,
    to: Arc<AsyncMutex<OwnedWriteHalf>>,
    state: Arc<Mutex<State>>,
    connection: usize,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        while let Some(raw) = take_frame(&mut buf) {
            if let Some(cmd) = decode(&raw) {
                note(&state, &cmd, connection);
            }
            if to.lock().await.write_all(&raw).await.is_err() {
                return;
            }
        }
        buf.reserve(64 * 1024);
        match from.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
