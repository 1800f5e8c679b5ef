//! Registration of the consume-side processors, and the helpers they share.
//!
//! broker-core's controller calls [`register`] once with the bound server; every consume-side
//! request code is routed here. The server's channel listener is also installed here, because the
//! client tables it maintains (consumers, producers, held pulls) all live on this side.

use std::sync::Arc;

use comet_protocol::code::RequestCode;
use comet_remoting::{RemotingServer, RequestProcessor};

use crate::client::ClientHousekeeping;
use crate::context::BrokerContext;
use crate::processor::client_manage::ClientManageProcessor;
use crate::processor::consumer_manage::ConsumerManageProcessor;
use crate::processor::lock::LockProcessor;
use crate::processor::offset::OffsetProcessor;
use crate::processor::pull::PullMessageProcessor;
use crate::processor::query::QueryMessageProcessor;
use crate::processor::send_back::SendBackProcessor;

/// Routes every consume-side request code to its processor and installs the client
/// housekeeping channel listener.
pub fn register(server: &RemotingServer, ctx: &Arc<BrokerContext>) {
    let pull: Arc<dyn RequestProcessor> = Arc::new(PullMessageProcessor::new(Arc::clone(ctx)));
    server.register(RequestCode::PullMessage.code(), Arc::clone(&pull));
    server.register(RequestCode::LitePullMessage.code(), pull);

    let consumer_manage: Arc<dyn RequestProcessor> =
        Arc::new(ConsumerManageProcessor::new(Arc::clone(ctx)));
    for code in [
        RequestCode::GetConsumerListByGroup,
        RequestCode::QueryConsumerOffset,
        RequestCode::UpdateConsumerOffset,
    ] {
        server.register(code.code(), Arc::clone(&consumer_manage));
    }

    let client_manage: Arc<dyn RequestProcessor> =
        Arc::new(ClientManageProcessor::new(Arc::clone(ctx)));
    for code in [
        RequestCode::HeartBeat,
        RequestCode::UnregisterClient,
        RequestCode::CheckClientConfig,
    ] {
        server.register(code.code(), Arc::clone(&client_manage));
    }

    server.register(
        RequestCode::ConsumerSendMsgBack.code(),
        Arc::new(SendBackProcessor::new(Arc::clone(ctx))),
    );

    let query: Arc<dyn RequestProcessor> = Arc::new(QueryMessageProcessor::new(Arc::clone(ctx)));
    server.register(RequestCode::QueryMessage.code(), Arc::clone(&query));
    server.register(RequestCode::ViewMessageById.code(), query);

    let offset: Arc<dyn RequestProcessor> = Arc::new(OffsetProcessor::new(Arc::clone(ctx)));
    for code in [
        RequestCode::SearchOffsetByTimestamp,
        RequestCode::GetMaxOffset,
        RequestCode::GetMinOffset,
        RequestCode::GetEarliestMsgStoretime,
        RequestCode::QueryBrokerOffset,
        RequestCode::GetAllConsumerOffset,
    ] {
        server.register(code.code(), Arc::clone(&offset));
    }

    let lock: Arc<dyn RequestProcessor> = Arc::new(LockProcessor::new(Arc::clone(ctx)));
    server.register(RequestCode::LockBatchMq.code(), Arc::clone(&lock));
    server.register(RequestCode::UnlockBatchMq.code(), lock);

    server.set_channel_event_listener(Arc::new(ClientHousekeeping::new(Arc::downgrade(ctx))));
}

pub(crate) use super::{error_response, header_error_response as bad_request};

/// The remote address as RocketMQ prints it (`ip:port`).
pub(crate) fn client_host(channel: &comet_remoting::Channel) -> String {
    channel.remote_addr().to_string()
}

/// A small uniform random number below `bound` (queue selection); `0` when `bound <= 1`.
pub(crate) fn random_below(bound: i32) -> i32 {
    use std::hash::{BuildHasher, Hasher};
    if bound <= 1 {
        return 0;
    }
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    let r = hasher.finish() % u64::from(bound.unsigned_abs());
    i32::try_from(r).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    use comet_protocol::ProtocolError;
    use comet_protocol::code::ResponseCode;

    #[test]
    fn bad_request_names_the_field() {
        let rsp = bad_request(&ProtocolError::MissingField("queueId"));
        assert_eq!(rsp.code, ResponseCode::SystemError.code());
        assert!(rsp.remark.as_deref().is_some_and(|r| r.contains("queueId")));
    }

    #[test]
    fn random_below_stays_in_range() {
        for bound in [-3, 0, 1, 2, 7] {
            for _ in 0..50 {
                let r = random_below(bound);
                assert!(r >= 0 && r < bound.max(1));
            }
        }
    }
}
