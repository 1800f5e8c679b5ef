//! Request processors, one small module per command family (the shape of mini-redis's `cmd/`):
//!
//! | module | commands |
//! |---|---|
//! | [`broker`] | REGISTER_BROKER, UNREGISTER_BROKER, QUERY_DATA_VERSION, WIPE/ADD_WRITE_PERM_OF_BROKER |
//! | [`route`] | GET_ROUTEINFO_BY_TOPIC |
//! | [`topic`] | topic lists (all, by cluster, system, unit), DELETE/REGISTER_TOPIC_IN_NAMESRV |
//! | [`cluster`] | GET_BROKER_CLUSTER_INFO |
//! | [`kv_config`] | PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE |
//! | [`config`] | GET/UPDATE_NAMESRV_CONFIG |
//!
//! Every handler is written as `fn(..) -> Reply`, where `Err` carries an error response already
//! built; `?` then turns a bad header into an answer instead of a dropped connection. Header
//! errors follow RocketMQ: a missing or unparsable field is SYSTEM_ERROR (Java throws from
//! header decoding and the transport answers SYSTEM_ERROR with the exception text), and the
//! remark names the field. Values that parse but make no sense (an empty broker name) are
//! INVALID_PARAMETER. Codes not registered here are answered REQUEST_CODE_NOT_SUPPORTED by the
//! transport.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use comet_protocol::RemotingCommand;
use comet_protocol::body::to_fastjson_bytes;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{CommandHeader, CommandHeaderExt};
use comet_remoting::{RemotingServer, RequestProcessor};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Serialize;

use crate::config::NamesrvConfig;
use crate::kv_config::KvConfigManager;
use crate::route_info::RouteInfoManager;

pub(crate) mod broker;
pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod kv_config;
pub(crate) mod route;
pub(crate) mod topic;

/// What every processor works on.
pub(crate) struct NamesrvContext {
    pub(crate) config: NamesrvConfig,
    pub(crate) route: Arc<RouteInfoManager>,
    pub(crate) kv: Arc<KvConfigManager>,
    /// `orderMessageEnable`, which UPDATE_NAMESRV_CONFIG may change while running.
    pub(crate) order_message_enable: AtomicBool,
}

/// A handler's outcome: the response, or the error code and remark to answer with.
pub(crate) type Reply = Result<RemotingCommand, Refusal>;

/// An error answer: kept small (not a whole `RemotingCommand`) so `?` stays cheap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) code: ResponseCode,
    pub(crate) remark: String,
}

impl Refusal {
    pub(crate) fn into_response(self) -> RemotingCommand {
        RemotingCommand::response(self.code, Some(self.remark))
    }
}

/// Registers every processor of the name server on `server`.
pub(crate) fn register_processors(server: &RemotingServer, ctx: &Arc<NamesrvContext>) {
    register(server, broker::CODES, broker::BrokerProcessor::new(ctx));
    register(server, route::CODES, route::RouteProcessor::new(ctx));
    register(server, topic::CODES, topic::TopicProcessor::new(ctx));
    register(server, cluster::CODES, cluster::ClusterProcessor::new(ctx));
    register(
        server,
        kv_config::CODES,
        kv_config::KvConfigProcessor::new(ctx),
    );
    register(server, config::CODES, config::ConfigProcessor::new(ctx));
}

fn register(server: &RemotingServer, codes: &[RequestCode], processor: impl RequestProcessor) {
    let processor: Arc<dyn RequestProcessor> = Arc::new(processor);
    for code in codes {
        server.register(code.code(), Arc::clone(&processor));
    }
}

/// Wraps a synchronous handler's reply as the future the transport expects.
pub(crate) fn respond(reply: Reply) -> BoxFuture<'static, Option<RemotingCommand>> {
    let response = reply.unwrap_or_else(Refusal::into_response);
    futures::future::ready(Some(response)).boxed()
}

pub(crate) fn success() -> RemotingCommand {
    RemotingCommand::response(ResponseCode::Success, None)
}

pub(crate) fn failure(code: ResponseCode, remark: impl Into<String>) -> Refusal {
    Refusal {
        code,
        remark: remark.into(),
    }
}

/// A SUCCESS response carrying `value` as fastjson JSON.
pub(crate) fn success_json<T: Serialize + ?Sized>(value: &T) -> Reply {
    let body = to_fastjson_bytes(value).map_err(|e| {
        failure(
            ResponseCode::SystemError,
            format!("encoding the body failed: {e}"),
        )
    })?;
    Ok(success().with_body(body))
}

/// Decodes the request header; a missing or malformed field becomes SYSTEM_ERROR naming it.
pub(crate) fn decode_header<H: CommandHeader>(request: &RemotingCommand) -> Result<H, Refusal> {
    request.decode_header::<H>().map_err(|e| {
        failure(
            ResponseCode::SystemError,
            format!("{}: {e}", RequestCode::from(request.code).name()),
        )
    })
}

/// Refuses an empty required value with INVALID_PARAMETER naming the field.
pub(crate) fn non_empty(field: &'static str, value: &str) -> Result<(), Refusal> {
    if value.trim().is_empty() {
        return Err(failure(
            ResponseCode::InvalidParameter,
            format!("header field `{field}` must not be empty"),
        ));
    }
    Ok(())
}

/// The answer to a code routed to a processor that does not handle it (a wiring mistake).
pub(crate) fn not_supported(code: i32) -> Refusal {
    failure(
        ResponseCode::RequestCodeNotSupported,
        format!("request type {code} not supported"),
    )
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::sync::Arc;

    use super::NamesrvContext;
    use crate::config::NamesrvConfig;
    use crate::kv_config::KvConfigManager;
    use crate::route_info::RouteInfoManager;

    /// A context over a temporary data directory (kept alive by the returned guard).
    pub(crate) fn context() -> (Arc<NamesrvContext>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let config = NamesrvConfig::new("127.0.0.1:0", dir.path());
        let kv = KvConfigManager::load(config.kv_config_path())
            .unwrap_or_else(|e| panic!("kv load: {e}"));
        let ctx = NamesrvContext {
            route: Arc::new(RouteInfoManager::new(config.broker_expiry_millis())),
            kv: Arc::new(kv),
            order_message_enable: std::sync::atomic::AtomicBool::new(config.order_message_enable),
            config,
        };
        (Arc::new(ctx), dir)
    }
}
