//! Commands brokers (and admin tools acting on brokers) send: REGISTER_BROKER,
//! UNREGISTER_BROKER, QUERY_DATA_VERSION, WIPE_WRITE_PERM_OF_BROKER, ADD_WRITE_PERM_OF_BROKER.
//!
//! REGISTER_BROKER is the heartbeat of the whole system: every broker sends its full topic table
//! to every name server every 30 s. The body is checked against `bodyCrc32` before it is parsed
//! (a corrupted table must not become routes), and the response hands the broker the order-topic
//! configuration and, for a slave, its master's HA address.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::body::{
    DataVersion, RegisterBrokerBody, TopicConfigSerializeWrapper, from_fastjson, to_fastjson_bytes,
};
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader, CommandHeaderExt,
    QueryDataVersionRequestHeader, QueryDataVersionResponseHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use super::{
    NamesrvContext, Reply, decode_header, failure, non_empty, not_supported, respond, success,
};
use crate::kv_config::NAMESPACE_ORDER_TOPIC_CONFIG;
use crate::route_info::{BrokerRegistration, RouteError};

pub(crate) const CODES: &[RequestCode] = &[
    RequestCode::RegisterBroker,
    RequestCode::UnregisterBroker,
    RequestCode::QueryDataVersion,
    RequestCode::WipeWritePermOfBroker,
    RequestCode::AddWritePermOfBroker,
];

/// Request `version` (V3_0_11) from which the REGISTER_BROKER body is a RegisterBrokerBody;
/// older brokers send the bare TopicConfigSerializeWrapper.
pub const REGISTER_BODY_MIN_VERSION: i32 = 37;
/// Ext field carrying the broker's zone (5.x).
pub const ZONE_NAME_EXT_KEY: &str = "__ZONE_NAME";
/// `bodyCrc32` is RocketMQ's CRC32 with the sign bit cleared.
const CRC32_MASK: u32 = 0x7FFF_FFFF;

pub(crate) struct BrokerProcessor {
    ctx: Arc<NamesrvContext>,
}

impl BrokerProcessor {
    pub(crate) fn new(ctx: &Arc<NamesrvContext>) -> Self {
        Self {
            ctx: Arc::clone(ctx),
        }
    }
}

impl RequestProcessor for BrokerProcessor {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let ctx = &self.ctx;
        respond(match RequestCode::from(request.code) {
            RequestCode::RegisterBroker => register_broker(ctx, &request, Some(channel.clone())),
            RequestCode::UnregisterBroker => unregister_broker(ctx, &request),
            RequestCode::QueryDataVersion => query_data_version(ctx, &request),
            RequestCode::WipeWritePermOfBroker => wipe_write_perm(ctx, &request),
            RequestCode::AddWritePermOfBroker => add_write_perm(ctx, &request),
            _ => Err(not_supported(request.code)),
        })
    }
}

/// `crc32(body) & 0x7FFFFFFF`, as RocketMQ's `UtilAll.crc32` (0 for no body).
pub fn body_crc32(body: Option<&[u8]>) -> i32 {
    match body {
        // The mask keeps the value within i32's positive range.
        Some(bytes) => i32::try_from(crc32fast::hash(bytes) & CRC32_MASK).unwrap_or(0),
        None => 0,
    }
}

pub(crate) fn register_broker(
    ctx: &NamesrvContext,
    request: &RemotingCommand,
    channel: Option<Channel>,
) -> Reply {
    let header: RegisterBrokerRequestHeader = decode_header(request)?;
    non_empty("brokerName", &header.broker_name)?;
    non_empty("brokerAddr", &header.broker_addr)?;
    non_empty("clusterName", &header.cluster_name)?;
    let body = request.body.as_deref();
    let expected_crc = header.body_crc32();
    if expected_crc != 0 && body_crc32(body) != expected_crc {
        tracing::warn!(broker = %header.broker_addr, "REGISTER_BROKER body crc32 mismatch");
        return Err(failure(ResponseCode::SystemError, "crc32 not match"));
    }
    let mut parsed = match body {
        Some(bytes) if request.version >= REGISTER_BODY_MIN_VERSION => {
            RegisterBrokerBody::decode(bytes, header.is_compressed()).map_err(|e| {
                failure(
                    ResponseCode::SystemError,
                    format!("Failed to decode RegisterBrokerBody: {e}"),
                )
            })?
        }
        Some(bytes) => RegisterBrokerBody {
            topic_config_serialize_wrapper: from_fastjson::<TopicConfigSerializeWrapper>(bytes)
                .map_err(|e| {
                    failure(
                        ResponseCode::SystemError,
                        format!("Failed to decode TopicConfigSerializeWrapper: {e}"),
                    )
                })?,
            filter_server_list: Vec::new(),
        },
        None => RegisterBrokerBody::default(),
    };
    if body.is_none() {
        // No topic table: a version that can never match a real one.
        parsed.topic_config_serialize_wrapper.data_version = DataVersion {
            timestamp: 0,
            counter: 0,
            state_version: 0,
        };
    }
    let registration = BrokerRegistration {
        cluster_name: header.cluster_name,
        broker_addr: header.broker_addr,
        broker_name: header.broker_name,
        broker_id: header.broker_id,
        ha_server_addr: header.ha_server_addr,
        zone_name: request.ext(ZONE_NAME_EXT_KEY).map(str::to_string),
        heartbeat_timeout_millis: header.heartbeat_timeout_millis,
        enable_acting_master: header.enable_acting_master,
        topic_config_wrapper: parsed.topic_config_serialize_wrapper,
        filter_server_list: parsed.filter_server_list,
        channel,
    };
    let result = ctx
        .route
        .register_broker(registration)
        .map_err(|e| match e {
            RouteError::UnregisteredBrokerSingleTopic { .. } => {
                tracing::warn!(reason = %e, "broker registration refused");
                failure(ResponseCode::SystemError, "register broker failed")
            }
            other => failure(
                ResponseCode::SystemError,
                format!("register broker failed: {other}"),
            ),
        })?;
    let mut response = success();
    response.encode_header(&RegisterBrokerResponseHeader {
        ha_server_addr: result.ha_server_addr,
        master_addr: result.master_addr,
    });
    if let Some(order) = ctx.kv.namespace_table(NAMESPACE_ORDER_TOPIC_CONFIG) {
        let body = to_fastjson_bytes(&order).map_err(|e| {
            failure(
                ResponseCode::SystemError,
                format!("encoding the KV table failed: {e}"),
            )
        })?;
        response = response.with_body(body);
    }
    Ok(response)
}

fn unregister_broker(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: UnregisterBrokerRequestHeader = decode_header(request)?;
    let removed = ctx.route.unregister_broker(
        &header.cluster_name,
        &header.broker_addr,
        &header.broker_name,
    );
    tracing::info!(
        cluster = %header.cluster_name, broker = %header.broker_name, id = header.broker_id,
        addr = %header.broker_addr, removed, "broker unregistered"
    );
    Ok(success())
}

fn query_data_version(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: QueryDataVersionRequestHeader = decode_header(request)?;
    let body = request.body.as_deref().ok_or_else(|| {
        failure(
            ResponseCode::SystemError,
            "QUERY_DATA_VERSION: the body (the broker's DataVersion) is missing",
        )
    })?;
    let version: DataVersion = from_fastjson(body).map_err(|e| {
        failure(
            ResponseCode::SystemError,
            format!("QUERY_DATA_VERSION: bad DataVersion body: {e}"),
        )
    })?;
    let (changed, current) =
        ctx.route
            .query_data_version(&header.cluster_name, &header.broker_addr, &version);
    let mut response = success();
    response.encode_header(&QueryDataVersionResponseHeader { changed });
    if let Some(current) = current {
        let body = to_fastjson_bytes(&current).map_err(|e| {
            failure(
                ResponseCode::SystemError,
                format!("encoding the DataVersion failed: {e}"),
            )
        })?;
        response = response.with_body(body);
    }
    Ok(response)
}

fn wipe_write_perm(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: WipeWritePermOfBrokerRequestHeader = decode_header(request)?;
    let count = ctx.route.wipe_write_perm(&header.broker_name);
    tracing::info!(broker = %header.broker_name, topics = count, "write permission wiped");
    let mut response = success();
    response.encode_header(&WipeWritePermOfBrokerResponseHeader {
        wipe_topic_count: i32::try_from(count).unwrap_or(i32::MAX),
    });
    Ok(response)
}

fn add_write_perm(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: AddWritePermOfBrokerRequestHeader = decode_header(request)?;
    let count = ctx.route.add_write_perm(&header.broker_name);
    tracing::info!(broker = %header.broker_name, topics = count, "write permission added");
    let mut response = success();
    response.encode_header(&AddWritePermOfBrokerResponseHeader {
        add_topic_count: i32::try_from(count).unwrap_or(i32::MAX),
    });
    Ok(response)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use comet_protocol::body::{KvTable, TopicConfig};
    use comet_protocol::headers::request_with_header;

    use super::*;
    use crate::processor::test_support::context;

    fn header(id: i64) -> RegisterBrokerRequestHeader {
        RegisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: format!("127.0.0.1:{}", 10911 + id),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: format!("127.0.0.1:{}", 10912 + id),
            broker_id: id,
            ..Default::default()
        }
    }

    fn body(topics: &[&str]) -> Vec<u8> {
        let table: HashMap<String, TopicConfig> = topics
            .iter()
            .map(|t| ((*t).to_string(), TopicConfig::with_queues(*t, 4, 4, 6)))
            .collect();
        let mut b = RegisterBrokerBody::default();
        b.topic_config_serialize_wrapper.topic_config_table = table;
        b.encode(false).unwrap_or_default()
    }

    fn register(h: &RegisterBrokerRequestHeader, body: Vec<u8>) -> RemotingCommand {
        request_with_header(RequestCode::RegisterBroker, h).with_body(body)
    }

    #[test]
    fn crc_is_checked_before_the_body_is_used() {
        let (ctx, _dir) = context();
        let bytes = body(&["T1", "T2"]);
        let mut h = header(0);
        h.body_crc32 = Some(body_crc32(Some(&bytes)).wrapping_add(1));
        let rsp = register_broker(&ctx, &register(&h, bytes.clone()), None)
            .unwrap_err()
            .into_response();
        assert_eq!(rsp.code, 1);
        assert_eq!(rsp.remark.as_deref(), Some("crc32 not match"));
        assert!(ctx.route.pickup_topic_route("T1").is_none());

        h.body_crc32 = Some(body_crc32(Some(&bytes)));
        let rsp = register_broker(&ctx, &register(&h, bytes), None).unwrap();
        assert_eq!(rsp.code, 0);
        assert!(ctx.route.pickup_topic_route("T1").is_some());
        assert!(rsp.body.is_none(), "no order config yet");
    }

    #[test]
    fn crc_matches_rocketmq_masking() {
        // crc32("123456789") = 0xCBF43926; masked to 31 bits.
        assert_eq!(body_crc32(Some(b"123456789")), 0x4BF4_3926);
        assert_eq!(body_crc32(None), 0);
    }

    #[test]
    fn slave_gets_master_and_order_config() {
        let (ctx, _dir) = context();
        ctx.kv
            .put(NAMESPACE_ORDER_TOPIC_CONFIG, "T1", "broker-a:4")
            .unwrap();
        register_broker(&ctx, &register(&header(0), body(&["T1", "T2"])), None).unwrap();
        let rsp = register_broker(&ctx, &register(&header(1), body(&["T1", "T2"])), None).unwrap();
        assert_eq!(rsp.ext("masterAddr"), Some("127.0.0.1:10911"));
        assert_eq!(rsp.ext("haServerAddr"), Some("127.0.0.1:10912"));
        let kv: KvTable = from_fastjson(rsp.body.as_deref().unwrap_or_default()).unwrap();
        assert_eq!(kv.table["T1"], "broker-a:4");
    }

    #[test]
    fn refusals_and_bad_input() {
        let (ctx, _dir) = context();
        let rsp = register_broker(&ctx, &register(&header(0), body(&["Only"])), None)
            .unwrap_err()
            .into_response();
        assert_eq!(
            (rsp.code, rsp.remark.as_deref()),
            (1, Some("register broker failed"))
        );

        let rsp = register_broker(&ctx, &register(&header(0), b"{oops".to_vec()), None)
            .unwrap_err()
            .into_response();
        assert_eq!(rsp.code, 1);
        assert!(
            rsp.remark
                .unwrap_or_default()
                .contains("RegisterBrokerBody")
        );

        let mut h = header(0);
        h.broker_name = " ".into();
        let rsp = register_broker(&ctx, &register(&h, body(&["A", "B"])), None)
            .unwrap_err()
            .into_response();
        assert_eq!(rsp.code, 29);
        assert!(rsp.remark.unwrap_or_default().contains("brokerName"));

        let mut req = register(&header(0), body(&["A", "B"]));
        req.ext_mut().insert("brokerId", "zero");
        let rsp = register_broker(&ctx, &req, None)
            .unwrap_err()
            .into_response();
        assert_eq!(rsp.code, 1);
        assert!(rsp.remark.unwrap_or_default().contains("brokerId"));

        // No body: registers the broker without topics.
        let rsp = register_broker(
            &ctx,
            &request_with_header(RequestCode::RegisterBroker, &header(0)),
            None,
        )
        .unwrap();
        assert_eq!(rsp.code, 0);
        assert_eq!(ctx.route.live_broker_count(), 1);
    }

    #[test]
    fn data_version_query_and_perm_commands() {
        let (ctx, _dir) = context();
        register_broker(&ctx, &register(&header(0), body(&["T1", "T2"])), None).unwrap();
        let q = QueryDataVersionRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: "127.0.0.1:10911".into(),
            cluster_name: "DefaultCluster".into(),
            broker_id: 0,
            ..Default::default()
        };
        let stored = ctx
            .route
            .query_data_version("DefaultCluster", "127.0.0.1:10911", &DataVersion::default())
            .1
            .unwrap();
        let req = request_with_header(RequestCode::QueryDataVersion, &q)
            .with_body(to_fastjson_bytes(&stored).unwrap());
        let rsp = query_data_version(&ctx, &req).unwrap();
        assert_eq!(rsp.ext("changed"), Some("false"));
        let back: DataVersion = from_fastjson(rsp.body.as_deref().unwrap_or_default()).unwrap();
        assert_eq!(back, stored);
        let rsp = query_data_version(
            &ctx,
            &request_with_header(RequestCode::QueryDataVersion, &q),
        )
        .unwrap_err()
        .into_response();
        assert_eq!(rsp.code, 1);

        let w = WipeWritePermOfBrokerRequestHeader {
            broker_name: "broker-a".into(),
            ..Default::default()
        };
        let rsp = wipe_write_perm(
            &ctx,
            &request_with_header(RequestCode::WipeWritePermOfBroker, &w),
        )
        .unwrap();
        assert_eq!(rsp.ext("wipeTopicCount"), Some("2"));
        let a = AddWritePermOfBrokerRequestHeader {
            broker_name: "broker-a".into(),
            ..Default::default()
        };
        let rsp = add_write_perm(
            &ctx,
            &request_with_header(RequestCode::AddWritePermOfBroker, &a),
        )
        .unwrap();
        assert_eq!(rsp.ext("addTopicCount"), Some("2"));
    }
}
