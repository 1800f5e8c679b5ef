//! Transactional messages over gRPC: EndTransaction, and what it needs to find the half.
//!
//! A gRPC client names a transaction by its topic (the producer group of gRPC sends) and
//! transaction id only, while the broker's END_TRANSACTION needs the half's commit-log and
//! half-queue offsets. As Apache's proxy does, the endpoint remembers those offsets
//! ([`GrpcTransactions`]) when a half is stored by SendMessage, and again when the transaction
//! check asks a gRPC producer about a half (the check names a new copy of the half). EndTransaction
//! takes the newest remembered half of `(topic, transaction_id)` and hands a remoting
//! END_TRANSACTION to the broker's transaction service, so commit, rollback, the check-immunity
//! rule and the op records are those of remoting producers. Unknown (or unspecified) resolutions
//! change nothing: the check asks again. A transaction the endpoint knows nothing of is answered
//! INTERNAL_SERVER_ERROR, as Apache's proxy answers it.
//!
//! Remembered halves are forgotten once ended, and after [`REMEMBERED_FOR`] (Apache's proxy
//! forgets them after 30 s; here a half stays known as long as a producer may still end it
//! without a check, up to the longest recovery duration a message may ask for).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use comet_broker::context::BrokerContext;
use comet_broker::core::end_transaction::end_transaction as end;
use comet_broker::transaction::TransactionService;
use comet_broker::transaction::check::TransactionCheck;
use comet_grpc_proto::v2;
use comet_protocol::headers::{EndTransactionRequestHeader, transaction_flag};
use comet_protocol::message::MessageExt;
use comet_protocol::message::properties::keys;
use parking_lot::Mutex;

use super::status;

/// How long a half's offsets stay known (the longest orphaned-transaction recovery duration).
pub const REMEMBERED_FOR: Duration = Duration::from_secs(60 * 60);
/// Most halves remembered per transaction (a check adds one per round).
const MAX_PER_TRANSACTION: usize = 16;

/// Where one half of a transaction is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HalfLocation {
    /// Commit-log offset of the half (or of its latest copy).
    pub commit_log_offset: i64,
    /// Its queue offset in the half topic.
    pub tran_state_table_offset: i64,
    /// The message id (UNIQ_KEY) the half carries.
    pub message_id: String,
}

/// `(producer group, transaction id)` → the halves remembered for it, oldest first, with the
/// time each was remembered.
type HalfTable = HashMap<(String, String), Vec<(Instant, HalfLocation)>>;

/// The halves the endpoint can end, by `(producer group, transaction id)`.
#[derive(Debug, Default)]
pub struct GrpcTransactions {
    halves: Mutex<HalfTable>,
}

impl GrpcTransactions {
    /// Remembers `half` as the newest location of `transaction_id` of `group`.
    pub fn remember(&self, group: &str, transaction_id: &str, half: HalfLocation) {
        let now = Instant::now();
        let mut halves = self.halves.lock();
        halves.retain(|_, list| {
            list.retain(|(at, _)| now.duration_since(*at) < REMEMBERED_FOR);
            !list.is_empty()
        });
        let list = halves
            .entry((group.to_owned(), transaction_id.to_owned()))
            .or_default();
        if list.len() >= MAX_PER_TRANSACTION {
            list.remove(0);
        }
        list.push((now, half));
    }

    /// The newest location of `transaction_id` of `group`, forgotten from here on.
    pub fn take(&self, group: &str, transaction_id: &str) -> Option<HalfLocation> {
        let mut halves = self.halves.lock();
        let key = (group.to_owned(), transaction_id.to_owned());
        let (_, half) = halves.remove(&key)?.pop()?;
        Some(half)
    }

    /// How many transactions are remembered.
    pub fn len(&self) -> usize {
        self.halves.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.halves.lock().is_empty()
    }
}

/// A transaction check addressed to a gRPC producer.
#[derive(Debug, Clone)]
pub struct CheckedHalf {
    /// The half's producer group (PGROUP: the topic, for gRPC sends).
    pub group: String,
    /// The transaction id the check names.
    pub transaction_id: String,
    /// Where the copy of the half the check names lies.
    pub location: HalfLocation,
    /// The half as the check describes it (real topic and queue restored).
    pub message: MessageExt,
}

/// What a gRPC producer is told of the transaction check `check`, and what its EndTransaction
/// will name.
pub fn checked_half(check: TransactionCheck) -> CheckedHalf {
    let TransactionCheck { header, message } = check;
    let message_id = header
        .msg_id
        .clone()
        .or_else(|| message.uniq_key().map(str::to_owned))
        .unwrap_or_default();
    let transaction_id = header
        .transaction_id
        .clone()
        .unwrap_or_else(|| message_id.clone());
    let group = message
        .properties
        .get(keys::PRODUCER_GROUP)
        .unwrap_or_default()
        .to_owned();
    CheckedHalf {
        group,
        transaction_id,
        location: HalfLocation {
            commit_log_offset: header.commit_log_offset,
            tran_state_table_offset: header.tran_state_table_offset,
            message_id,
        },
        message,
    }
}

/// Answers one EndTransaction (see the module docs).
pub async fn end_transaction(
    ctx: &BrokerContext,
    service: &TransactionService,
    transactions: &GrpcTransactions,
    peer: SocketAddr,
    request: &v2::EndTransactionRequest,
) -> v2::Status {
    let topic = request.topic.as_ref().map_or("", |t| t.name.as_str());
    if topic.trim().is_empty() {
        return status::of(v2::Code::IllegalTopic, "topic is blank");
    }
    if request.transaction_id.trim().is_empty() {
        return status::of(
            v2::Code::InvalidTransactionId,
            "transaction id cannot be empty",
        );
    }
    let Some(half) = transactions.take(topic, &request.transaction_id) else {
        return status::of(
            v2::Code::InternalServerError,
            format!(
                "no half message of transaction {} of topic {topic} is known",
                request.transaction_id
            ),
        );
    };
    let commit_or_rollback = match request.resolution() {
        v2::TransactionResolution::Commit => transaction_flag::COMMIT,
        v2::TransactionResolution::Rollback => transaction_flag::ROLLBACK,
        v2::TransactionResolution::Unspecified => transaction_flag::NOT_TYPE,
    };
    let from_check = request.source() == v2::TransactionSource::SourceServerCheck;
    let message_id = if request.message_id.is_empty() {
        half.message_id.clone()
    } else {
        request.message_id.clone()
    };
    let header = EndTransactionRequestHeader {
        topic: Some(topic.to_owned()),
        producer_group: topic.to_owned(),
        tran_state_table_offset: half.tran_state_table_offset,
        commit_log_offset: half.commit_log_offset,
        commit_or_rollback,
        from_transaction_check: Some(from_check),
        msg_id: message_id,
        transaction_id: Some(request.transaction_id.clone()),
        ..EndTransactionRequestHeader::default()
    };
    match end(ctx, service, &header, peer, None).await {
        Ok(_) => status::ok(),
        Err(refusal) => status::refused(&refusal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn half(offset: i64) -> HalfLocation {
        HalfLocation {
            commit_log_offset: offset,
            tran_state_table_offset: offset / 100,
            message_id: "M".to_owned(),
        }
    }

    #[test]
    fn the_newest_half_is_taken_once() {
        let txs = GrpcTransactions::default();
        txs.remember("T", "tx1", half(100));
        txs.remember("T", "tx1", half(200));
        txs.remember("T", "tx2", half(300));
        assert_eq!(txs.len(), 2);
        assert_eq!(txs.take("T", "tx1"), Some(half(200)));
        assert_eq!(txs.take("T", "tx1"), None);
        assert_eq!(txs.take("Other", "tx2"), None);
        assert_eq!(txs.take("T", "tx2"), Some(half(300)));
        assert!(txs.is_empty());
    }

    #[test]
    fn a_transaction_keeps_a_bounded_number_of_halves() {
        let txs = GrpcTransactions::default();
        for i in 0..100 {
            txs.remember("T", "tx", half(i));
        }
        let kept = txs
            .halves
            .lock()
            .get(&("T".into(), "tx".into()))
            .map(Vec::len);
        assert_eq!(kept, Some(MAX_PER_TRANSACTION));
    }
}
