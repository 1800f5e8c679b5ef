//! `RemoteBrokerOffsetStore`: a clustering group's offsets, kept by the broker that hosts each
//! queue (QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET).
//!
//! The in-memory table is authoritative for this member while it owns a queue; the broker copy
//! is refreshed every persist interval with oneway updates (Java does the same: an offset update
//! lost in flight is repaired by the next one, and pulls also carry the offset via the COMMIT
//! flag). Reading from the broker maps QUERY_NOT_FOUND to "no offset" so rebalance can apply
//! ConsumeFromWhere.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{
    QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use futures::future::BoxFuture;

use super::{OffsetStore, OffsetTable, ReadOffsetType};
use crate::consumer::MessageQueue;
use crate::error::ClientError;
use crate::instance::MQClientInstance;

/// Offsets of a clustering consumer group, stored on the brokers.
pub struct RemoteBrokerOffsetStore {
    instance: Arc<MQClientInstance>,
    group: String,
    table: OffsetTable,
}

impl std::fmt::Debug for RemoteBrokerOffsetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteBrokerOffsetStore")
            .field("group", &self.group)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl RemoteBrokerOffsetStore {
    /// An offset store of `group` on the brokers the `instance` knows.
    pub fn new(instance: Arc<MQClientInstance>, group: impl Into<String>) -> Self {
        RemoteBrokerOffsetStore {
            instance,
            group: group.into(),
            table: OffsetTable::default(),
        }
    }

    /// Where the queue's offsets are read and committed: its broker's master, or a slave of it
    /// while the route names no master (as Java's client does), refreshing the route once if
    /// the broker is unknown.
    async fn broker_addr(&self, mq: &MessageQueue) -> Result<String, ClientError> {
        if let Some(found) = self.instance.find_broker_address_in_admin(&mq.broker_name) {
            return Ok(found.broker_addr);
        }
        self.instance
            .update_topic_route_info_from_name_server(&mq.topic)
            .await?;
        self.instance
            .find_broker_address_in_admin(&mq.broker_name)
            .map(|found| found.broker_addr)
            .ok_or_else(|| ClientError::Client(format!("the broker[{}] not exist", mq.broker_name)))
    }

    /// Asks the broker for the group's offset of `mq`; `Ok(None)` on QUERY_NOT_FOUND.
    pub async fn fetch_consume_offset_from_broker(
        &self,
        mq: &MessageQueue,
    ) -> Result<Option<i64>, ClientError> {
        let addr = self.broker_addr(mq).await?;
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: self.group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            set_zero_if_not_found: None,
            ..Default::default()
        };
        let timeout = self.instance.config().mq_client_api_timeout;
        match self
            .instance
            .api()
            .query_consumer_offset(&addr, header, timeout)
            .await
        {
            Ok(offset) => Ok(Some(offset)),
            Err(e) if e.response_code() == Some(ResponseCode::QueryNotFound.into()) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends `offset` of `mq` to its broker (oneway or awaiting the answer).
    pub async fn update_consume_offset_to_broker(
        &self,
        mq: &MessageQueue,
        offset: i64,
        oneway: bool,
    ) -> Result<(), ClientError> {
        let addr = self.broker_addr(mq).await?;
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: self.group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            commit_offset: offset,
            ..Default::default()
        };
        let api = self.instance.api();
        if oneway {
            api.update_consumer_offset_oneway(&addr, header).await
        } else {
            let timeout = self.instance.config().mq_client_api_timeout;
            api.update_consumer_offset(&addr, header, timeout).await
        }
    }
}

impl OffsetStore for RemoteBrokerOffsetStore {
    fn load(&self) -> Result<(), ClientError> {
        Ok(())
    }

    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        self.table.update(mq, offset, increase_only);
    }

    fn read_offset<'a>(
        &'a self,
        mq: &'a MessageQueue,
        read_type: ReadOffsetType,
    ) -> BoxFuture<'a, Result<Option<i64>, ClientError>> {
        Box::pin(async move {
            match read_type {
                ReadOffsetType::ReadFromMemory => Ok(self.table.get(mq)),
                ReadOffsetType::MemoryFirstThenStore if self.table.get(mq).is_some() => {
                    Ok(self.table.get(mq))
                }
                ReadOffsetType::MemoryFirstThenStore | ReadOffsetType::ReadFromStore => {
                    let offset = self.fetch_consume_offset_from_broker(mq).await?;
                    if let Some(offset) = offset {
                        self.table.update(mq, offset, false);
                    }
                    Ok(offset)
                }
            }
        })
    }

    fn persist_all<'a>(&'a self, mqs: &'a HashSet<MessageQueue>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if mqs.is_empty() {
                return;
            }
            for (mq, offset) in self.table.snapshot() {
                if !mqs.contains(&mq) {
                    continue;
                }
                if let Err(e) = self
                    .update_consume_offset_to_broker(&mq, offset, true)
                    .await
                {
                    tracing::warn!(group = %self.group, %mq, error = %e,
                        "updateConsumeOffsetToBroker failed");
                }
            }
            // Queues no longer owned: their offsets were persisted when they were given up.
            self.table.retain(mqs);
        })
    }

    fn persist<'a>(&'a self, mq: &'a MessageQueue) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(offset) = self.table.get(mq)
                && let Err(e) = self.update_consume_offset_to_broker(mq, offset, true).await
            {
                tracing::warn!(group = %self.group, %mq, error = %e,
                    "updateConsumeOffsetToBroker failed");
            }
        })
    }

    fn update_and_persist_offset<'a>(
        &'a self,
        mq: &'a MessageQueue,
        offset: i64,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        self.table.update(mq, offset, false);
        Box::pin(self.update_consume_offset_to_broker(mq, offset, false))
    }

    fn remove_offset(&self, mq: &MessageQueue) {
        self.table.remove(mq);
    }

    fn clone_offset_table(&self, topic: &str) -> HashMap<MessageQueue, i64> {
        self.table.clone_topic(topic)
    }
}
