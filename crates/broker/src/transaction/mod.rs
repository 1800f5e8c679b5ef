//! Transactional messages, RocketMQ's two-phase send:
//!
//! 1. **Half**: the producer sends its message with TRAN_MSG=true; the broker parks it in
//!    `RMQ_SYS_TRANS_HALF_TOPIC` queue 0 ([`half::into_half`]), invisible to consumers of the real
//!    topic, and answers with the half's offsets.
//! 2. **End**: after its local transaction the producer sends END_TRANSACTION. A commit re-stores
//!    the message in its real topic (type COMMIT) and then appends an op record ([`op`]); a
//!    rollback appends only the op record; "unknown" does nothing and leaves the outcome to the
//!    check.
//! 3. **Check** ([`check`]): a periodic task walks the half queue; every half without an op record
//!    that is older than `transactionTimeOut` is put back at the tail with its check count raised,
//!    and the producer group is asked (CHECK_TRANSACTION_STATE) for the outcome, which comes back
//!    as an END_TRANSACTION for the copy. After `transactionCheckMax` checks the half is
//!    discarded.
//!
//! Everything durable lives in the store, as in RocketMQ: halves and op records are ordinary
//! messages, and the check service's progress in both queues is the consumer offset of the
//! system group `CID_RMQ_SYS_TRANS` — so a restart resumes exactly where the last persisted
//! offsets point, and pending halves survive.
//!
//! One addition over RocketMQ: [`TransactionService`] remembers (in memory, bounded) which
//! transactions were already ended, keyed by the queue offset of their first half. A late
//! END_TRANSACTION for an already-checked transaction, or a check answer racing the producer's own
//! answer, is then ignored instead of delivering the message twice. After a restart the op
//! records alone decide, as in RocketMQ (at-least-once).

pub mod check;
pub mod half;
pub mod op;

use std::collections::{HashSet, VecDeque};
use std::net::IpAddr;

use comet_protocol::message::MessageExt;
use comet_protocol::message::id::UniqIdGenerator;
use parking_lot::Mutex;

use crate::context::BrokerContext;

/// Consumer group under which the check service keeps its progress in the half and op queues
/// (`TransactionalMessageUtil.buildConsumerGroup()`).
pub const TRANS_CHECK_GROUP: &str = "CID_RMQ_SYS_TRANS";
/// How many ended transactions are remembered for duplicate suppression (see the module docs).
pub const ENDED_TRANSACTIONS_REMEMBERED: usize = 65_536;

/// Bounded FIFO set of ended transaction identities.
#[derive(Debug, Default)]
struct EndedTransactions {
    set: HashSet<i64>,
    order: VecDeque<i64>,
}

impl EndedTransactions {
    fn insert(&mut self, identity: i64) -> bool {
        if !self.set.insert(identity) {
            return false;
        }
        self.order.push_back(identity);
        while self.order.len() > ENDED_TRANSACTIONS_REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        true
    }

    fn remove(&mut self, identity: i64) {
        if self.set.remove(&identity) {
            self.order.retain(|i| *i != identity);
        }
    }
}

/// Shared state of the END_TRANSACTION processor and the check service.
#[derive(Debug)]
pub struct TransactionService {
    ended: Mutex<EndedTransactions>,
    uniq_ids: UniqIdGenerator,
}

impl TransactionService {
    /// A service whose op records get message ids of `store_ip`.
    pub fn new(store_ip: IpAddr) -> Self {
        TransactionService {
            ended: Mutex::new(EndedTransactions::default()),
            uniq_ids: UniqIdGenerator::with_ip(store_ip),
        }
    }

    /// Claims the right to end `identity`; `false` if it was already ended (or is being ended).
    pub fn begin_end(&self, identity: i64) -> bool {
        self.ended.lock().insert(identity)
    }

    /// Gives a claim back (the final store failed, so a later answer may retry).
    pub fn abandon_end(&self, identity: i64) {
        self.ended.lock().remove(identity);
    }

    /// Whether `identity` was ended during this broker's lifetime.
    pub fn is_ended(&self, identity: i64) -> bool {
        self.ended.lock().set.contains(&identity)
    }

    /// Appends the op record finishing `half` (and, for a re-put copy, its first copy).
    /// Returns whether the store took it.
    pub async fn write_op(&self, ctx: &BrokerContext, half: &MessageExt) -> bool {
        let identity = half::transaction_identity(half);
        let mut offsets = vec![half.queue_offset];
        if identity != half.queue_offset {
            offsets.push(identity);
        }
        let msg = op::op_message(
            &offsets,
            half.queue_id,
            ctx.store_host,
            self.uniq_ids.next_id(),
            comet_protocol::time::now_millis(),
        );
        let result = ctx.store.put_message(msg).await;
        if !result.status.is_written() {
            tracing::error!(half_offset = half.queue_offset, status = ?result.status,
                "writing the transaction op record failed");
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_set_is_bounded_and_claims_once() {
        let service = TransactionService::new("127.0.0.1".parse().unwrap());
        assert!(service.begin_end(1));
        assert!(!service.begin_end(1));
        assert!(service.is_ended(1));
        service.abandon_end(1);
        assert!(!service.is_ended(1));
        for i in 0..(ENDED_TRANSACTIONS_REMEMBERED as i64 + 5) {
            service.begin_end(i);
        }
        assert!(!service.is_ended(0));
        assert!(service.is_ended(ENDED_TRANSACTIONS_REMEMBERED as i64 + 4));
        assert_eq!(
            service.ended.lock().order.len(),
            ENDED_TRANSACTIONS_REMEMBERED
        );
    }
}
