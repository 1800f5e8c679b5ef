//! POP crash test: messages are popped with a short invisible time, half of them acked on their
//! first delivery; the broker is SIGKILLed while the other half are in flight (popped, not
//! acked) and restarted on the same data directory. A popper that follows the broker acks
//! every delivery after the first, and a ledger checks that every message is acked in the end:
//! none of the un-acked ones is lost across the kill. Messages handed out again after the kill
//! although acked before it are counted as duplicates (POP redelivery is at-least-once).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    AckMessageRequestHeader, POP_INIT_MODE_MIN, PopMessageRequestHeader, request_with_header,
};
use comet_protocol::message::MessageExt;
use comet_protocol::message::record::decode_records;
use comet_protocol::time::now_millis;
use comet_remoting::{ClientConfig, RemotingClient};

use crate::body::{body_for, intact_id};
use crate::error::{Error, Result};
use crate::serve::{FlushMode, Serve, ServeOptions};
use crate::wire::{self, RPC_TIMEOUT, SendOutcome};

/// Topic the messages are popped from.
pub const TOPIC: &str = "PopCrashTopic";
/// Queues of [`TOPIC`].
pub const QUEUES: i32 = 4;
/// The POP consumer group.
pub const GROUP: &str = "pop_crash_group";
/// Pause of the popper after a pop that found nothing.
const IDLE: Duration = Duration::from_millis(50);

/// What to run.
#[derive(Debug, Clone)]
pub struct PopCrashConfig {
    pub comet_bin: PathBuf,
    pub data_dir: PathBuf,
    pub flush: FlushMode,
    /// Messages sent.
    pub messages: u64,
    /// Invisible time of every pop.
    pub invisible: Duration,
    /// How long after the restart every message must have been acked.
    pub drain: Duration,
}

impl PopCrashConfig {
    /// 200 messages, 20 s invisible time (long enough to wait for the offsets to be persisted
    /// before the kill), 60 s to drain.
    pub fn new(comet_bin: PathBuf, data_dir: PathBuf) -> Self {
        PopCrashConfig {
            comet_bin,
            data_dir,
            flush: FlushMode::Async,
            messages: 200,
            invisible: Duration::from_secs(20),
            drain: Duration::from_secs(60),
        }
    }
}

/// What the run saw.
#[derive(Debug, Clone, Default)]
pub struct PopCrashReport {
    pub sent: u64,
    /// Messages popped but not acked when the broker was killed.
    pub in_flight_at_kill: u64,
    /// Messages never acked by the end of the drain.
    pub lost: u64,
    /// Deliveries of messages already acked.
    pub duplicates: u64,
    /// Messages popped that the harness never sent (or damaged bodies).
    pub unknown: u64,
}

impl std::fmt::Display for PopCrashReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pop-crash: sent {} in flight at the kill {} lost {} duplicates {} unknown {}",
            self.sent, self.in_flight_at_kill, self.lost, self.duplicates, self.unknown
        )
    }
}

#[derive(Debug, Default)]
struct Ledger {
    sent: HashSet<u64>,
    delivered: HashMap<u64, u32>,
    acked: HashSet<u64>,
    duplicates: u64,
    unknown: u64,
}

fn pop_request(invisible_ms: i64) -> RemotingCommand {
    let header = PopMessageRequestHeader {
        consumer_group: GROUP.to_owned(),
        topic: TOPIC.to_owned(),
        queue_id: -1,
        max_msg_nums: 32,
        invisible_time: invisible_ms,
        poll_time: 0,
        born_time: now_millis(),
        init_mode: POP_INIT_MODE_MIN,
        exp_type: Some("TAG".to_owned()),
        exp: Some("*".to_owned()),
        order: Some(false),
        attempt_id: None,
        rpc: Default::default(),
    };
    request_with_header(RequestCode::PopMessage, &header)
}

/// The ack of a popped message, under the topic its receipt handle names.
fn ack_request(m: &MessageExt) -> Option<RemotingCommand> {
    let handle = m.properties.get("POP_CK")?;
    let fields: Vec<&str> = handle.split(' ').collect();
    let topic = match fields.get(4) {
        Some(&"1") => format!("%RETRY%{GROUP}_{}", m.topic),
        _ => m.topic.clone(),
    };
    let header = AckMessageRequestHeader {
        consumer_group: GROUP.to_owned(),
        topic,
        queue_id: fields.get(6)?.parse().ok()?,
        extra_info: handle.to_owned(),
        offset: m.queue_offset,
        rpc: Default::default(),
    };
    Some(request_with_header(RequestCode::AckMessage, &header))
}

/// One pop against `addr`: books every message, acks it unless it is an odd id's first
/// delivery (`hold_odd`). Returns how many messages came back.
async fn pop_round(
    client: &RemotingClient,
    addr: &str,
    ledger: &mut Ledger,
    invisible: i64,
    hold_odd: bool,
) -> usize {
    let Ok(rsp) = client
        .invoke(addr, pop_request(invisible), RPC_TIMEOUT)
        .await
    else {
        return 0;
    };
    if rsp.code != ResponseCode::Success.code() {
        return 0;
    }
    let Ok(messages) = decode_records(&rsp.body.clone().unwrap_or_default(), true) else {
        ledger.unknown += 1;
        return 0;
    };
    for m in &messages {
        let Some(id) = intact_id(&m.body).filter(|id| ledger.sent.contains(id)) else {
            ledger.unknown += 1;
            continue;
        };
        if ledger.acked.contains(&id) {
            ledger.duplicates += 1;
        }
        let count = ledger.delivered.entry(id).or_default();
        *count += 1;
        if hold_odd && id % 2 == 1 && *count == 1 {
            continue;
        }
        let Some(ack) = ack_request(m) else {
            ledger.unknown += 1;
            continue;
        };
        if let Ok(r) = client.invoke(addr, ack, RPC_TIMEOUT).await
            && r.code == ResponseCode::Success.code()
        {
            ledger.acked.insert(id);
        }
    }
    messages.len()
}

/// The group's offsets in [`TOPIC`] summed, as `config/consumerOffset.json` holds them (0 when
/// the file is absent or unreadable).
fn offsets_persisted(store_dir: &std::path::Path) -> i64 {
    let path = store_dir.join("config").join("consumerOffset.json");
    let Ok(text) = std::fs::read(path) else {
        return 0;
    };
    // The file has fastjson's bare integer keys.
    let Ok(json) = comet_protocol::body::from_fastjson::<serde_json::Value>(&text) else {
        return 0;
    };
    json["offsetTable"][format!("{TOPIC}@{GROUP}")]
        .as_object()
        .map_or(0, |queues| {
            queues.values().filter_map(serde_json::Value::as_i64).sum()
        })
}

/// Runs the test (see the module docs).
pub async fn run(config: &PopCrashConfig) -> Result<PopCrashReport> {
    let options = ServeOptions::new(
        config.comet_bin.clone(),
        config.data_dir.clone(),
        config.flush,
    );
    let mut serve = Serve::start(&options)?;
    let client = RemotingClient::new(ClientConfig::default());
    let mut ledger = Ledger::default();
    for id in 0..config.messages {
        let queue = i32::try_from(id % QUEUES as u64).unwrap_or(0);
        let request = wire::send_request(TOPIC, queue, QUEUES, body_for(id));
        match wire::send(&client, &serve.broker, request, RPC_TIMEOUT).await {
            SendOutcome::Acked(_) => {
                ledger.sent.insert(id);
            }
            outcome => return Err(Error::Violation(format!("send {id} failed: {outcome:?}"))),
        }
    }
    let invisible = i64::try_from(config.invisible.as_millis()).unwrap_or(i64::MAX);
    // First pass: every message popped once, the even ones acked.
    let first_pass_end = now_millis() + 60_000;
    while ledger.delivered.len() < ledger.sent.len() && now_millis() < first_pass_end {
        if pop_round(&client, &serve.broker, &mut ledger, invisible, true).await == 0 {
            tokio::time::sleep(IDLE).await;
        }
    }
    // Kill only once the pops' offsets are on disk: otherwise the restarted broker would hand
    // the un-acked messages out again from the old offsets, and the revive path would go
    // untested.
    let persisted_by = now_millis() + 30_000;
    while offsets_persisted(&options.store_dir()) < ledger.sent.len() as i64 {
        if now_millis() > persisted_by {
            return Err(Error::Violation(
                "pop offsets never reached consumerOffset.json".into(),
            ));
        }
        tokio::time::sleep(IDLE).await;
    }
    let in_flight = ledger.sent.len() - ledger.acked.len();
    serve.kill();
    tracing::info!(in_flight, "broker SIGKILLed with POP messages in flight");
    serve = Serve::start(&options)?;
    let deadline = now_millis() + i64::try_from(config.drain.as_millis()).unwrap_or(i64::MAX);
    while ledger.acked.len() < ledger.sent.len() && now_millis() < deadline {
        if pop_round(&client, &serve.broker, &mut ledger, invisible, false).await == 0 {
            tokio::time::sleep(IDLE).await;
        }
    }
    drop(serve);
    client.shutdown().await;
    Ok(PopCrashReport {
        sent: ledger.sent.len() as u64,
        in_flight_at_kill: in_flight as u64,
        lost: ledger.sent.difference(&ledger.acked).count() as u64,
        duplicates: ledger.duplicates,
        unknown: ledger.unknown,
    })
}
