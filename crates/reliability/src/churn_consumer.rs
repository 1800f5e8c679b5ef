//! The consumer side of [`crate::churn`], run as a separate process (`comet-reliability
//! churn-consumer`, a hidden subcommand) so that the churn can end it the way real consumers
//! end: by a graceful exit, or by SIGKILL — no offset persist, no UNREGISTER_CLIENT, no unlock;
//! the broker only sees the connection close.
//!
//! The process joins the churn group with a push consumer (concurrent or orderly listener) and
//! reports every delivery as one line on stdout, written and flushed *before* the listener
//! returns, so that whatever the consumer may have committed has already been reported when a
//! SIGKILL arrives. It stops gracefully (`shutdown()`) when its stdin reaches end of file, which
//! is also what happens if the parent dies: no consumer outlives the run.
//!
//! Line format (space separated): `D <monotonic ns> <queue id> <queue offset> <id or -> <body
//! hash>`. The timestamp is `CLOCK_MONOTONIC`, which is shared by all processes of the machine,
//! so deliveries of different consumer processes can be put in one order; `-` marks a body that
//! is not one the harness produced (or is damaged); the hash is FNV-1a of the body.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use comet_client::MessageExt;
use comet_client::consumer::push::{DefaultMQPushConsumer, PushConsumerConfig};
use comet_client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyStatus, concurrently_fn, orderly_fn,
};

use crate::body::intact_id;
use crate::error::{Error, Result};

/// Tag of a delivery line.
const DELIVERY_TAG: &str = "D";
/// Marks a body that is not intact.
const NO_ID: &str = "-";
/// Nanoseconds per second, for the monotonic timestamp.
const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// What a consumer process saw: one delivered message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// `CLOCK_MONOTONIC` nanoseconds when the listener got the message.
    pub at_nanos: u64,
    pub queue_id: i32,
    pub queue_offset: i64,
    /// The message id if the body is intact, `None` otherwise.
    pub id: Option<u64>,
    pub body_hash: u64,
}

impl Delivery {
    /// The stdout line (without the newline).
    pub fn to_line(&self) -> String {
        let id = self
            .id
            .map_or_else(|| NO_ID.to_owned(), |id| id.to_string());
        format!(
            "{DELIVERY_TAG} {} {} {} {id} {:016x}",
            self.at_nanos, self.queue_id, self.queue_offset, self.body_hash
        )
    }

    /// Parses a line written by [`Delivery::to_line`]; `None` for anything else (log noise).
    pub fn parse_line(line: &str) -> Option<Delivery> {
        let mut fields = line.split_ascii_whitespace();
        if fields.next()? != DELIVERY_TAG {
            return None;
        }
        let at_nanos = fields.next()?.parse().ok()?;
        let queue_id = fields.next()?.parse().ok()?;
        let queue_offset = fields.next()?.parse().ok()?;
        let id = match fields.next()? {
            NO_ID => None,
            id => Some(id.parse().ok()?),
        };
        let body_hash = u64::from_str_radix(fields.next()?, 16).ok()?;
        fields.next().is_none().then_some(Delivery {
            at_nanos,
            queue_id,
            queue_offset,
            id,
            body_hash,
        })
    }
}

/// FNV-1a of a body: a fingerprint the parent can check against the body of the claimed id.
pub fn body_hash(body: &[u8]) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    body.iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

/// `CLOCK_MONOTONIC` in nanoseconds (0 if the clock cannot be read).
#[allow(unsafe_code)]
pub fn monotonic_nanos() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs.saturating_mul(NANOS_PER_SECOND).saturating_add(nanos)
}

/// How the consumer process consumes.
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    pub namesrv: String,
    pub topic: String,
    pub group: String,
    pub instance_name: String,
    /// Orderly listener (queues locked on the broker) instead of the concurrent one.
    pub orderly: bool,
    /// Heartbeat, rebalance and offset-persist period.
    pub client_timer: Duration,
}

/// Writes delivery lines to stdout; a failed write (the parent is gone) ends the process.
struct Reporter;

impl Reporter {
    fn report(&self, msgs: &[MessageExt]) {
        let mut text = String::new();
        for m in msgs {
            let delivery = Delivery {
                at_nanos: monotonic_nanos(),
                queue_id: m.queue_id,
                queue_offset: m.queue_offset,
                id: intact_id(&m.body),
                body_hash: body_hash(&m.body),
            };
            text.push_str(&delivery.to_line());
            text.push('\n');
        }
        let mut out = std::io::stdout().lock();
        if out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            // Nobody is listening any more: consuming further would only produce unreported
            // deliveries.
            std::process::exit(1);
        }
    }
}

/// Runs one consumer until stdin is closed, then shuts it down gracefully.
pub async fn run(options: &ConsumerOptions) -> Result<()> {
    let mut config = PushConsumerConfig::new(options.group.clone());
    config.client.namesrv_addr.clone_from(&options.namesrv);
    config
        .client
        .instance_name
        .clone_from(&options.instance_name);
    config.client.heartbeat_broker_interval = options.client_timer;
    config.client.rebalance_interval = options.client_timer;
    config.client.persist_consumer_offset_interval = options.client_timer;
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    let consumer = DefaultMQPushConsumer::new(config);
    consumer.subscribe(&options.topic, "*").await?;
    let reporter = Arc::new(Reporter);
    let sink = Arc::clone(&reporter);
    if options.orderly {
        consumer.register_message_listener(orderly_fn(move |msgs, _ctx| {
            sink.report(msgs);
            ConsumeOrderlyStatus::Success
        }));
    } else {
        consumer.register_message_listener(concurrently_fn(move |msgs, _ctx| {
            sink.report(msgs);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }));
    }
    consumer.start().await?;
    // The parent closes our stdin to ask for a graceful exit.
    tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink)
    })
    .await
    .map_err(|e| Error::Violation(format!("stdin watcher failed: {e}")))?
    .map_err(|e| Error::io("stdin", e))?;
    consumer.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_lines_round_trip_and_noise_is_ignored() {
        let intact = Delivery {
            at_nanos: 123_456_789_012,
            queue_id: 7,
            queue_offset: 4242,
            id: Some((5 << 32) | 17),
            body_hash: body_hash(b"x"),
        };
        let damaged = Delivery { id: None, ..intact };
        for d in [intact, damaged] {
            assert_eq!(Delivery::parse_line(&d.to_line()), Some(d));
        }
        assert_eq!(Delivery::parse_line(""), None);
        assert_eq!(Delivery::parse_line("INFO starting"), None);
        assert_eq!(Delivery::parse_line("D 1 2 3 4"), None);
        assert_eq!(Delivery::parse_line("D 1 2 3 4 ff extra"), None);
        assert!(monotonic_nanos() > 0);
        assert_ne!(body_hash(b"a"), body_hash(b"b"));
    }
}
