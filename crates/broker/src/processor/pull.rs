//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): the header decoded, the queue read by
//! [`crate::core::pull`] (which runs RocketMQ's checks in RocketMQ's order), the result answered:
//! the response header always carries the queue's bounds and the next offset, and the remark is
//! the store status name.
//!
//! A pull that finds nothing new (PULL_NOT_FOUND) with the SUSPEND bit is held by the
//! broker's pull hold service instead of being
//! answered; a held pull re-enters [`process_pull`] with `allow_suspend = false`, which also keeps
//! it from committing its offset a second time.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::ResponseCode;
use comet_protocol::headers::{
    CommandHeaderExt, PullMessageRequestHeader, PullMessageResponseHeader,
};
use comet_remoting::{Channel, RequestProcessor};
use comet_store::GetMessageResult;
use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::context::BrokerContext;
use crate::core::pull::{pull as core_pull, status_name};
use crate::filter::TagFilter;
use crate::long_polling::{HeldPull, HeldPullAnswerer};
use crate::processor::{Rejection, client_host, decode_header, reject};

/// Handles PULL_MESSAGE and LITE_PULL_MESSAGE.
#[derive(Debug)]
pub struct PullMessageProcessor {
    ctx: Arc<BrokerContext>,
}

impl PullMessageProcessor {
    pub fn new(ctx: Arc<BrokerContext>) -> Self {
        Self { ctx }
    }
}

impl RequestProcessor for PullMessageProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let response = process_pull(&self.ctx, channel, &request, true);
        Box::pin(async move { response })
    }
}

/// Runs one pull. `None` means the pull is held (answered later by the hold service); that only
/// happens with `allow_suspend`, which is also what marks a first attempt (commit allowed).
pub fn process_pull(
    ctx: &Arc<BrokerContext>,
    channel: &Channel,
    request: &RemotingCommand,
    allow_suspend: bool,
) -> Option<RemotingCommand> {
    pull(ctx, channel, request, allow_suspend).unwrap_or_else(|rejection| Some(*rejection))
}

fn pull(
    ctx: &Arc<BrokerContext>,
    channel: &Channel,
    request: &RemotingCommand,
    allow_suspend: bool,
) -> Result<Option<RemotingCommand>, Rejection> {
    let header: PullMessageRequestHeader = decode_header(request)?;
    let pulled = core_pull(ctx, &client_host(channel), &header, allow_suspend)
        .map_err(|refusal| reject(refusal.code, refusal.remark))?;
    if pulled.code == ResponseCode::PullNotFound
        && allow_suspend
        && header.has_suspend()
        && hold(ctx, channel, request, &header, pulled.filter)
    {
        return Ok(None);
    }
    Ok(Some(build_response(
        pulled.code,
        pulled.result,
        pulled.suggested_broker,
    )))
}

/// Hands a pull that found nothing to the hold service; false when the hold table is full and
/// the pull must be answered now.
fn hold(
    ctx: &Arc<BrokerContext>,
    channel: &Channel,
    request: &RemotingCommand,
    header: &PullMessageRequestHeader,
    filter: TagFilter,
) -> bool {
    let topic = header.topic.as_str();
    let held = HeldPull {
        request: request.clone(),
        channel: channel.clone(),
        pull_from_offset: header.queue_offset,
        filter,
        suspended_at: Instant::now(),
        hold_time: ctx.pull_hold.hold_time(header.suspend_timeout_millis),
    };
    ctx.pull_hold.bind(|| PullAnswerer::of(ctx));
    match ctx.pull_hold.hold(topic, header.queue_id, held) {
        Ok(()) => {
            // A message may have been dispatched between the read and the hold: its wake-up
            // found nothing to wake. Re-check so it is not left to the timer.
            let max = ctx.store.get_max_offset_in_queue(topic, header.queue_id);
            if max > header.queue_offset {
                ctx.pull_hold
                    .notify_message_arriving(topic, header.queue_id, max, None);
            }
            true
        }
        Err(_) => {
            tracing::debug!(
                topic,
                queue_id = header.queue_id,
                "hold table full; answering now"
            );
            false
        }
    }
}

/// The pull response: header with the queue bounds, remark = status name, body = records.
fn build_response(code: ResponseCode, result: GetMessageResult, suggested: i64) -> RemotingCommand {
    let header = PullMessageResponseHeader {
        suggest_which_broker_id: suggested,
        next_begin_offset: result.next_begin_offset,
        min_offset: result.min_offset,
        max_offset: result.max_offset,
        ..Default::default()
    };
    let mut response = RemotingCommand::response(code, Some(status_name(result.status).to_owned()));
    response.encode_header(&header);
    if code == ResponseCode::Success {
        // Slices of the mapped CommitLog (adjacent records joined), handed to the socket as
        // they are (one vectored write), never copied into one body: a catch-up read moves
        // gigabytes, and a copy per pull would cost more CPU than the rest of the pull.
        response.body_parts = result.transfer;
    }
    response
}

/// Answers the pulls the hold service kept: each runs again, now without suspension, and its
/// response goes to the original request, timed from the suspension for the request-latency
/// metrics.
#[derive(Debug)]
pub struct PullAnswerer {
    ctx: std::sync::Weak<BrokerContext>,
}

impl PullAnswerer {
    /// The answerer of `ctx`'s held pulls.
    pub fn of(ctx: &Arc<BrokerContext>) -> Arc<dyn HeldPullAnswerer> {
        Arc::new(PullAnswerer {
            ctx: Arc::downgrade(ctx),
        })
    }
}

impl HeldPullAnswerer for PullAnswerer {
    fn max_offset(&self, topic: &str, queue_id: i32) -> Option<i64> {
        let ctx = self.ctx.upgrade()?;
        Some(ctx.store.get_max_offset_in_queue(topic, queue_id))
    }

    fn respond(
        &self,
        channel: &Channel,
        request: &RemotingCommand,
        suspended_at: Instant,
    ) -> Option<RemotingCommand> {
        let ctx = self.ctx.upgrade()?;
        let mut response = process_pull(&ctx, channel, request, false)?;
        let key = crate::metrics::rpc::RpcKey {
            request_code: request.code,
            response_code: response.code,
            long_polling: true,
            oneway: false,
        };
        ctx.rpc.record(key, suspended_at.elapsed());
        response.opaque = request.opaque;
        response.serialize_type = request.serialize_type;
        Some(response)
    }
}
