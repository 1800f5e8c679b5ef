//! Changing how long a received message stays invisible: the new receipt handle, for a client's
//! ChangeInvisibleDuration and for the broker's renewals of push consumers' messages.

use comet_grpc_proto::v2;
use comet_protocol::headers::ChangeInvisibleTimeRequestHeader;

use super::consumer::GrpcReceipt;
use super::status;
use comet_broker::context::BrokerContext;
use comet_broker::pop::handle::{ReceiptHandle, real_topic};

/// Makes the message of `receipt` invisible for `invisible` ms from now; the new handle.
pub async fn change(
    ctx: &BrokerContext,
    group: &str,
    topic: &str,
    receipt: &GrpcReceipt,
    invisible: i64,
) -> Result<GrpcReceipt, v2::Status> {
    let handle = &receipt.handle;
    let header = ChangeInvisibleTimeRequestHeader {
        consumer_group: group.to_owned(),
        topic: real_topic(topic, group, &handle.retry_flag),
        queue_id: handle.queue_id,
        extra_info: handle.encode(),
        offset: receipt.queue_offset,
        invisible_time: invisible,
        rpc: Default::default(),
    };
    let changed = comet_broker::core::ack::change_invisible(ctx, &header)
        .await
        .map_err(|refusal| status::refused(&refusal))?;
    let renewed = if handle.is_fifo() {
        // The batch stays keyed by its pop time; the invisible time ends at the new moment.
        let until = changed.pop_time.saturating_add(changed.invisible_time);
        ReceiptHandle {
            invisible_time: until.saturating_sub(handle.pop_time),
            ..handle.clone()
        }
    } else {
        ReceiptHandle {
            ck_start_offset: receipt.queue_offset,
            pop_time: changed.pop_time,
            invisible_time: changed.invisible_time,
            revive_qid: changed.revive_qid,
            ..handle.clone()
        }
    };
    Ok(GrpcReceipt::new(
        renewed,
        receipt.queue_offset,
        receipt.commit_log_offset,
    ))
}
