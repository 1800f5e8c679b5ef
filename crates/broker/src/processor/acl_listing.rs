//! GET_BROKER_CLUSTER_ACL_CONFIG (RocketMQ 4.x ACL 1.0): the broker's `plain_acl.yml` as written —
//! global white list and accounts with their permissions — for consoles and tools. Read from the
//! file at each request, so it shows what the broker enforces after a hot reload. Secret keys are
//! never sent, and only admin accounts may ask (the ACL hook checks it).

use comet_protocol::code::ResponseCode;

use crate::context::BrokerContext;
use crate::processor::json_body;
use crate::processor::{Answer, reject};

pub(super) fn acl_listing(ctx: &BrokerContext) -> Answer {
    if !ctx.config.acl_enable {
        return Err(reject(
            ResponseCode::SystemError,
            "The broker does not enable acl",
        ));
    }
    let path = ctx.config.acl_file_path();
    let listing = comet_acl::config::read_file(&path)
        .and_then(|text| comet_acl::config::listing(&text))
        .map_err(|e| reject(ResponseCode::SystemError, e.to_string()))?;
    Ok(json_body(&listing))
}
