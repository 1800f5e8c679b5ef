//! The broker's routing table: every request code it serves and the processor that answers it.
//!
//! This is the one place a code is bound to a processor, so a reader can see at a glance what the
//! broker speaks. A code missing here is answered REQUEST_CODE_NOT_SUPPORTED by the server.

use std::sync::Arc;

use comet_protocol::code::RequestCode::{self, *};
use comet_remoting::{RemotingServer, RequestProcessor};

use crate::context::BrokerContext;
use crate::processor::admin::AdminProcessor;
use crate::processor::call_consumer::CallConsumerProcessor;
use crate::processor::client_manage::ClientManageProcessor;
use crate::processor::consumer_manage::ConsumerManageProcessor;
use crate::processor::end_transaction::EndTransactionProcessor;
use crate::processor::lock::LockProcessor;
use crate::processor::offset::OffsetProcessor;
use crate::processor::pop::{AckMessageProcessor, PopMessageProcessor};
use crate::processor::pull::PullMessageProcessor;
use crate::processor::query::QueryMessageProcessor;
use crate::processor::send::SendMessageProcessor;
use crate::processor::send_back::SendBackProcessor;
use crate::transaction::TransactionService;

/// The broker's processors, one per family of request codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Storing messages: [`SendMessageProcessor`].
    Send,
    /// Committing or rolling back a half message: [`EndTransactionProcessor`].
    EndTransaction,
    /// Client heartbeats and their subscriptions: [`ClientManageProcessor`].
    ClientManage,
    /// Pulls, held by long polling: [`PullMessageProcessor`].
    Pull,
    /// Group membership and committed offsets: [`ConsumerManageProcessor`].
    ConsumerManage,
    /// A consumer handing a message back for retry or the DLQ: [`SendBackProcessor`].
    SendBack,
    /// Orderly consumers' queue locks: [`LockProcessor`].
    Lock,
    /// Queue offset lookups: [`OffsetProcessor`].
    Offset,
    /// Lookups by key and by offset message id: [`QueryMessageProcessor`].
    Query,
    /// Topics, groups, statistics and offset resets for tools: [`AdminProcessor`].
    Admin,
    /// Tool requests relayed to one consumer client: [`CallConsumerProcessor`].
    CallConsumer,
    /// POP reads: [`PopMessageProcessor`].
    Pop,
    /// POP acks and invisible-time changes: [`AckMessageProcessor`].
    PopAck,
}

/// Every request code the broker serves, by processor, in the order a client meets them.
pub const ROUTES: &[(Route, &[RequestCode])] = &[
    (Route::Send, &[SendMessage, SendMessageV2, SendBatchMessage]),
    (Route::EndTransaction, &[EndTransaction]),
    (
        Route::ClientManage,
        &[HeartBeat, UnregisterClient, CheckClientConfig],
    ),
    (Route::Pull, &[PullMessage, LitePullMessage]),
    (
        Route::ConsumerManage,
        &[
            GetConsumerListByGroup,
            QueryConsumerOffset,
            UpdateConsumerOffset,
        ],
    ),
    (Route::SendBack, &[ConsumerSendMsgBack]),
    (Route::Lock, &[LockBatchMq, UnlockBatchMq]),
    (
        Route::Offset,
        &[
            SearchOffsetByTimestamp,
            GetMaxOffset,
            GetMinOffset,
            GetEarliestMsgStoretime,
            QueryBrokerOffset,
            GetAllConsumerOffset,
        ],
    ),
    (Route::Query, &[QueryMessage, ViewMessageById]),
    (
        Route::Admin,
        &[
            UpdateAndCreateTopic,
            UpdateAndCreateTopicList,
            DeleteTopicInBroker,
            GetAllTopicConfig,
            GetTopicConfig,
            GetTopicStatsInfo,
            GetConsumeStats,
            UpdateAndCreateSubscriptiongroup,
            DeleteSubscriptiongroup,
            GetAllSubscriptiongroupConfig,
            GetBrokerRuntimeInfo,
            GetConsumerConnectionList,
            GetProducerConnectionList,
            QueryTopicConsumeByWho,
            GetBrokerConsumeStats,
            GetAllProducerInfo,
            ViewBrokerStatsData,
            GetBrokerClusterAclConfig,
            InvokeBrokerToResetOffset,
            GetBrokerConfig,
            UpdateBrokerConfig,
            GetAllDelayOffset,
            GetTimerCheckPoint,
            GetTimerMetrics,
        ],
    ),
    (
        Route::CallConsumer,
        &[GetConsumerRunningInfo, ConsumeMessageDirectly],
    ),
    (
        Route::Pop,
        &[
            PopMessage,
            PeekMessage,
            Notification,
            PollingInfo,
            SetMessageRequestMode,
            GetAllMessageRequestMode,
            QueryAssignment,
        ],
    ),
    (
        Route::PopAck,
        &[AckMessage, BatchAckMessage, ChangeMessageInvisibletime],
    ),
];

/// Builds each processor once and registers it for every code of its route.
pub fn register(
    server: &RemotingServer,
    ctx: &Arc<BrokerContext>,
    transactions: &Arc<TransactionService>,
) {
    for &(route, codes) in ROUTES {
        let ctx = Arc::clone(ctx);
        let processor: Arc<dyn RequestProcessor> = match route {
            Route::Send => Arc::new(SendMessageProcessor::new(ctx)),
            Route::EndTransaction => {
                Arc::new(EndTransactionProcessor::new(ctx, Arc::clone(transactions)))
            }
            Route::ClientManage => Arc::new(ClientManageProcessor::new(ctx)),
            Route::Pull => Arc::new(PullMessageProcessor::new(ctx)),
            Route::ConsumerManage => Arc::new(ConsumerManageProcessor::new(ctx)),
            Route::SendBack => Arc::new(SendBackProcessor::new(ctx)),
            Route::Lock => Arc::new(LockProcessor::new(ctx)),
            Route::Offset => Arc::new(OffsetProcessor::new(ctx)),
            Route::Query => Arc::new(QueryMessageProcessor::new(ctx)),
            Route::Admin => Arc::new(AdminProcessor::new(ctx)),
            Route::CallConsumer => Arc::new(CallConsumerProcessor::new(ctx)),
            Route::Pop => Arc::new(PopMessageProcessor::new(ctx)),
            Route::PopAck => Arc::new(AckMessageProcessor::new(ctx)),
        };
        for code in codes {
            server.register(code.code(), Arc::clone(&processor));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_code_has_one_processor() {
        let mut seen = HashSet::new();
        for (route, codes) in ROUTES {
            for code in *codes {
                assert!(code.is_known(), "{route:?} routes an unknown code");
                assert!(seen.insert(code.code()), "{code:?} routed twice");
            }
        }
        assert_eq!(seen.len(), 59);
    }
}
