//! KV config commands: PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE.
//!
//! Writes persist to disk before they answer, so they run on the blocking pool rather than on
//! the connection's task; reads are in-memory.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    CommandHeaderExt, DeleteKvConfigRequestHeader, GetKvConfigRequestHeader,
    GetKvConfigResponseHeader, GetKvListByNamespaceRequestHeader, PutKvConfigRequestHeader,
};
use comet_remoting::{Channel, RequestProcessor};
use futures::FutureExt;
use futures::future::BoxFuture;

use super::{
    NamesrvContext, Refusal, Reply, decode_header, failure, not_supported, respond, success,
    success_json,
};
use crate::kv_config::{KvConfigError, KvConfigManager};

pub(crate) const CODES: &[RequestCode] = &[
    RequestCode::PutKvConfig,
    RequestCode::GetKvConfig,
    RequestCode::DeleteKvConfig,
    RequestCode::GetKvlistByNamespace,
];

pub(crate) struct KvConfigProcessor {
    ctx: Arc<NamesrvContext>,
}

impl KvConfigProcessor {
    pub(crate) fn new(ctx: &Arc<NamesrvContext>) -> Self {
        Self {
            ctx: Arc::clone(ctx),
        }
    }
}

impl RequestProcessor for KvConfigProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        match RequestCode::from(request.code) {
            RequestCode::PutKvConfig => {
                let kv = Arc::clone(&self.ctx.kv);
                async move {
                    Some(
                        put(kv, &request)
                            .await
                            .unwrap_or_else(Refusal::into_response),
                    )
                }
                .boxed()
            }
            RequestCode::DeleteKvConfig => {
                let kv = Arc::clone(&self.ctx.kv);
                async move {
                    Some(
                        delete(kv, &request)
                            .await
                            .unwrap_or_else(Refusal::into_response),
                    )
                }
                .boxed()
            }
            RequestCode::GetKvConfig => respond(get(&self.ctx, &request)),
            RequestCode::GetKvlistByNamespace => respond(list_namespace(&self.ctx, &request)),
            _ => respond(Err(not_supported(request.code))),
        }
    }
}

async fn put(kv: Arc<KvConfigManager>, request: &RemotingCommand) -> Reply {
    let header: PutKvConfigRequestHeader = decode_header(request)?;
    let outcome =
        tokio::task::spawn_blocking(move || kv.put(&header.namespace, &header.key, &header.value))
            .await;
    match outcome {
        Ok(Ok(())) => Ok(success()),
        Ok(Err(e)) => Err(kv_failure(&e)),
        Err(e) => Err(failure(
            ResponseCode::SystemError,
            format!("PUT_KV_CONFIG failed: {e}"),
        )),
    }
}

async fn delete(kv: Arc<KvConfigManager>, request: &RemotingCommand) -> Reply {
    let header: DeleteKvConfigRequestHeader = decode_header(request)?;
    let outcome =
        tokio::task::spawn_blocking(move || kv.delete(&header.namespace, &header.key)).await;
    match outcome {
        Ok(Ok(_)) => Ok(success()),
        Ok(Err(e)) => Err(kv_failure(&e)),
        Err(e) => Err(failure(
            ResponseCode::SystemError,
            format!("DELETE_KV_CONFIG failed: {e}"),
        )),
    }
}

fn kv_failure(error: &KvConfigError) -> Refusal {
    if error.is_invalid_input() {
        failure(ResponseCode::InvalidParameter, error.to_string())
    } else {
        tracing::error!(%error, "persisting the KV config failed");
        failure(ResponseCode::SystemError, error.to_string())
    }
}

fn get(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: GetKvConfigRequestHeader = decode_header(request)?;
    match ctx.kv.get(&header.namespace, &header.key) {
        Some(value) => {
            let mut response = success();
            response.encode_header(&GetKvConfigResponseHeader { value: Some(value) });
            Ok(response)
        }
        None => Err(failure(
            ResponseCode::QueryNotFound,
            format!(
                "No config item, Namespace: {} Key: {}",
                header.namespace, header.key
            ),
        )),
    }
}

fn list_namespace(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: GetKvListByNamespaceRequestHeader = decode_header(request)?;
    match ctx.kv.namespace_table(&header.namespace) {
        Some(table) => success_json(&table),
        None => Err(failure(
            ResponseCode::QueryNotFound,
            format!("No config item, Namespace: {}", header.namespace),
        )),
    }
}
