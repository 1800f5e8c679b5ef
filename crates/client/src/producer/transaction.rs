//! The transaction producer: RocketMQ's `TransactionMQProducer`.
//!
//! A transactional send is two-phase: the message goes to the broker as a *half* (TRAN_MSG=true,
//! PGROUP = this group), invisible to consumers; the application's local transaction then runs
//! ([`TransactionListener::execute_local_transaction`]); its outcome goes back to the broker that
//! stored the half as a oneway END_TRANSACTION — commit makes the message visible, rollback drops
//! it, unknown leaves it pending.
//!
//! A pending half is not forgotten: the broker periodically sends CHECK_TRANSACTION_STATE to a
//! producer of the group, which runs [`TransactionListener::check_local_transaction`] and answers
//! END_TRANSACTION with `fromTransactionCheck=true`. Checks arrive on the client instance's
//! connection tasks, so they are handed to a bounded pool here: at most
//! [`CHECK_CONCURRENCY`] run at once, each on a blocking thread (a check usually queries a
//! database), and at most [`CHECK_QUEUE_CAPACITY`] wait; beyond that a check is dropped with a
//! log line — the broker asks again next round, so dropping is safe where queueing without bound
//! is not.

use std::any::Any;
use std::sync::{Arc, Weak};

use comet_protocol::code::RequestCode;
use comet_protocol::headers::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader, RpcHeader,
};
use comet_protocol::message::id::decode_offset_msg_id;
use comet_protocol::message::properties::keys;
use tokio::sync::Semaphore;

use super::hook::EndTransactionContext;
use super::transaction_listener::{Async, AsyncTransactionListener, Blocking, Runner};
// The listener's contract lives with the listener; also named here, beside the producer that
// runs it.
pub use super::transaction_listener::{LocalTransactionState, TransactionListener};
use super::{DefaultMQProducer, ProducerConfig, ProducerInner, SendResult, SendStatus};
use crate::error::{ClientError, Result};
use crate::instance::MQClientInstance;
use crate::message::{Message, MessageExt};

/// Checks running at once (Java `checkThreadPoolMaxSize`).
pub const CHECK_CONCURRENCY: usize = 1;
/// Checks waiting to run before new ones are dropped (Java `checkRequestHoldMax`).
pub const CHECK_QUEUE_CAPACITY: usize = 2000;

/// What [`TransactionProducer::send_message_in_transaction`] reports.
#[derive(Debug, Clone, PartialEq)]
pub struct TransactionSendResult {
    /// The half message's send result.
    pub send_result: SendResult,
    /// The local transaction's outcome (ROLLBACK when the half was not stored safely).
    pub local_transaction_state: LocalTransactionState,
}

/// A producer of transactional messages (RocketMQ's `TransactionMQProducer`). It is also a
/// normal producer: [`Self::producer`] sends non-transactional messages for the same group.
#[derive(Clone)]
pub struct TransactionProducer {
    producer: DefaultMQProducer,
    listener: Arc<dyn Runner>,
}

impl std::fmt::Debug for TransactionProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionProducer")
            .field("group", &self.producer.config().producer_group)
            .finish()
    }
}

impl TransactionProducer {
    /// A transaction producer (not started) running `listener`.
    pub fn new(config: ProducerConfig, listener: Arc<dyn TransactionListener>) -> Self {
        Self::with_runner(config, Arc::new(Blocking(listener)))
    }

    /// A transaction producer (not started) running an async `listener`.
    pub fn new_async(config: ProducerConfig, listener: impl AsyncTransactionListener) -> Self {
        Self::with_runner(config, Arc::new(Async(listener)))
    }

    pub(super) fn with_runner(config: ProducerConfig, listener: Arc<dyn Runner>) -> Self {
        let producer = DefaultMQProducer::new(config);
        let checker = Arc::new(Checker {
            listener: Arc::clone(&listener),
            producer: Arc::downgrade(&producer.inner),
            queued: Arc::new(Semaphore::new(CHECK_QUEUE_CAPACITY)),
            running: Arc::new(Semaphore::new(CHECK_CONCURRENCY)),
        });
        producer.set_transaction_check(Arc::new(move |addr, msg, header| {
            checker.submit(addr, msg, header);
        }));
        TransactionProducer { producer, listener }
    }

    /// Starts the underlying producer (see [`DefaultMQProducer::start`]).
    pub async fn start(&self) -> Result<()> {
        self.producer.start().await
    }

    /// Shuts the underlying producer down.
    pub async fn shutdown(&self) {
        self.producer.shutdown().await;
    }

    /// The underlying producer.
    pub fn producer(&self) -> &DefaultMQProducer {
        &self.producer
    }

    /// Sends `msg` as a half message, runs the local transaction, and reports its outcome to the
    /// broker (see the module docs). A delay level is removed: it cannot apply to a half. The
    /// END_TRANSACTION is oneway; if it is lost, the broker's check resolves the transaction.
    pub async fn send_message_in_transaction(
        &self,
        mut msg: Message,
        arg: &(dyn Any + Send + Sync),
    ) -> Result<TransactionSendResult> {
        if msg.delay_level() != 0 {
            msg.remove_property(keys::DELAY_TIME_LEVEL);
        }
        let config = self.producer.config();
        msg.put_property(keys::TRANSACTION_PREPARED, "true");
        msg.put_property(
            keys::PRODUCER_GROUP,
            config.client.with_namespace(&config.producer_group),
        );
        // The id is fixed here, not in the send, so the listener sees the id the broker stores.
        if msg.uniq_key().is_none() {
            msg.put_property(keys::UNIQ_KEY, self.producer.inner.uniq.next_id());
        }
        let send_result =
            self.producer.send(msg.clone()).await.map_err(|e| {
                ClientError::Client(format!("sending the half message failed: {e}"))
            })?;
        let (state, remark) = match send_result.send_status {
            SendStatus::SendOk => {
                if let Some(id) = &send_result.transaction_id {
                    msg.put_property(keys::TRANSACTION_ID, id.clone());
                }
                msg.transaction_id = msg.uniq_key().map(str::to_string);
                match self.listener.execute(&msg, arg).await {
                    Ok(state) => (state, None),
                    Err(remark) => {
                        tracing::warn!(msg_id = %send_result.msg_id,
                            "local transaction panicked; its state is unknown until checked");
                        (LocalTransactionState::Unknown, Some(remark))
                    }
                }
            }
            // Stored, but without the durability asked for: never commit such a half.
            _ => (LocalTransactionState::RollbackMessage, None),
        };
        if let Err(e) = self
            .end_transaction(&msg, &send_result, state, remark)
            .await
        {
            tracing::warn!(msg_id = %send_result.msg_id, ?state, error = %e,
                "END_TRANSACTION not sent; the broker will check the transaction");
        }
        Ok(TransactionSendResult {
            send_result,
            local_transaction_state: state,
        })
    }

    async fn end_transaction(
        &self,
        msg: &Message,
        send_result: &SendResult,
        state: LocalTransactionState,
        remark: Option<String>,
    ) -> Result<()> {
        let instance = self.instance()?;
        let id = if send_result.offset_msg_id.is_empty() {
            &send_result.msg_id
        } else {
            &send_result.offset_msg_id
        };
        let (_, commit_log_offset) = decode_offset_msg_id(id)?;
        let broker_name = &send_result.message_queue.broker_name;
        let addr = instance
            .find_broker_address_in_publish(broker_name)
            .ok_or_else(|| {
                ClientError::Client(format!("no known address of broker {broker_name}"))
            })?;
        let config = self.producer.config();
        self.producer
            .inner
            .end_transaction_hooks(&EndTransactionContext {
                producer_group: config.producer_group.clone(),
                broker_addr: addr.clone(),
                topic: config.client.without_namespace(&msg.topic).to_owned(),
                tags: msg.tags().map(str::to_owned),
                keys: msg.property(keys::KEYS).map(str::to_owned),
                region: msg.property(keys::MSG_REGION).map(str::to_owned),
                msg_id: send_result.msg_id.clone(),
                transaction_id: msg.transaction_id.clone(),
                transaction_state: state,
                from_transaction_check: false,
            });
        let header = EndTransactionRequestHeader {
            topic: Some(send_result.message_queue.topic.clone()),
            producer_group: config.client.with_namespace(&config.producer_group),
            tran_state_table_offset: send_result.queue_offset,
            commit_log_offset,
            commit_or_rollback: state.commit_or_rollback(),
            from_transaction_check: Some(false),
            msg_id: send_result.msg_id.clone(),
            transaction_id: send_result.transaction_id.clone(),
            rpc: RpcHeader {
                broker_name: Some(broker_name.clone()),
                ..Default::default()
            },
        };
        let mut request = instance
            .api()
            .request_with(RequestCode::EndTransaction, &header);
        request.remark = remark;
        instance
            .api()
            .remoting()
            .invoke_oneway(&addr, request)
            .await?;
        Ok(())
    }

    fn instance(&self) -> Result<Arc<MQClientInstance>> {
        self.producer
            .client_instance()
            .ok_or_else(|| ClientError::Client("the producer is not started".to_string()))
    }
}

/// Runs broker checks on the bounded pool (see the module docs). It holds the producer weakly:
/// the producer owns it, and must stay droppable.
struct Checker {
    listener: Arc<dyn Runner>,
    producer: Weak<ProducerInner>,
    queued: Arc<Semaphore>,
    running: Arc<Semaphore>,
}

impl Checker {
    fn submit(
        &self,
        broker_addr: &str,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) {
        let Ok(slot) = Arc::clone(&self.queued).try_acquire_owned() else {
            tracing::warn!(broker = broker_addr, msg_id = ?header.msg_id,
                "transaction check queue full; check dropped (the broker asks again)");
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no runtime to run a transaction check on");
            return;
        };
        let running = Arc::clone(&self.running);
        let listener = Arc::clone(&self.listener);
        let Some(inner) = self.producer.upgrade() else {
            return;
        };
        let producer = DefaultMQProducer { inner };
        let broker_addr = broker_addr.to_string();
        runtime.spawn(async move {
            let _slot = slot;
            let Ok(_permit) = running.acquire_owned().await else {
                return;
            };
            let mut msg = msg;
            if let Some(uniq) = msg.uniq_key().map(str::to_string) {
                msg.properties
                    .insert(keys::TRANSACTION_ID, uniq);
            }
            let msg = Arc::new(msg);
            let (state, remark) = match listener.check(Arc::clone(&msg)).await {
                Ok(state) => (state, None),
                Err(remark) => {
                    tracing::warn!(error = %remark, "checkLocalTransaction failed; answering unknown");
                    (LocalTransactionState::Unknown, Some(remark))
                }
            };
            if let Err(e) = answer_check(&producer, &broker_addr, &msg, &header, state, remark).await {
                tracing::warn!(broker = %broker_addr, error = %e, "answer to a transaction check not sent");
            }
        });
    }
}

/// END_TRANSACTION answering a check, to the broker that asked.
async fn answer_check(
    producer: &DefaultMQProducer,
    broker_addr: &str,
    msg: &MessageExt,
    header: &CheckTransactionStateRequestHeader,
    state: LocalTransactionState,
    remark: Option<String>,
) -> Result<()> {
    let instance = producer
        .client_instance()
        .ok_or_else(|| ClientError::Client("the producer is shut down".to_string()))?;
    let config = producer.config();
    let msg_id = msg
        .uniq_key()
        .map(str::to_string)
        .unwrap_or_else(|| msg.msg_id());
    producer
        .inner
        .end_transaction_hooks(&EndTransactionContext {
            producer_group: config.producer_group.clone(),
            broker_addr: broker_addr.to_owned(),
            topic: config.client.without_namespace(&msg.topic).to_owned(),
            tags: msg.tags().map(str::to_owned),
            keys: msg.properties.get(keys::KEYS).map(str::to_owned),
            region: msg.properties.get(keys::MSG_REGION).map(str::to_owned),
            msg_id: msg_id.clone(),
            transaction_id: header.transaction_id.clone(),
            transaction_state: state,
            from_transaction_check: true,
        });
    let end = EndTransactionRequestHeader {
        topic: header.topic.clone(),
        producer_group: config.client.with_namespace(&config.producer_group),
        tran_state_table_offset: header.tran_state_table_offset,
        commit_log_offset: header.commit_log_offset,
        commit_or_rollback: state.commit_or_rollback(),
        from_transaction_check: Some(true),
        msg_id,
        transaction_id: header.transaction_id.clone(),
        rpc: RpcHeader {
            broker_name: header.rpc.broker_name.clone(),
            ..Default::default()
        },
    };
    let mut request = instance
        .api()
        .request_with(RequestCode::EndTransaction, &end);
    request.remark = remark;
    instance
        .api()
        .remoting()
        .invoke_oneway(broker_addr, request)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_to_sysflag_values() {
        assert_eq!(LocalTransactionState::CommitMessage.commit_or_rollback(), 8);
        assert_eq!(
            LocalTransactionState::RollbackMessage.commit_or_rollback(),
            12
        );
        assert_eq!(LocalTransactionState::Unknown.commit_or_rollback(), 0);
    }
}
