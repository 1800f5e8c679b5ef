//! GET_ROUTEINFO_BY_TOPIC: what every producer and consumer asks every 30 s.
//!
//! The body's JSON form depends on the asker: clients of version ≥ 4.9.4
//! (request `version >= 401`) or that send `acceptStandardJsonOnly=true` get standard JSON
//! (`"brokerAddrs":{"0":"…"}`); older Java clients and the Go client get fastjson's legacy form
//! with bare numeric keys (`"brokerAddrs":{0:"…"}`), which is what they were written against.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::body::TopicRouteData;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::GetRouteInfoRequestHeader;
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use super::{NamesrvContext, Reply, decode_header, failure, not_supported, respond, success};
use crate::kv_config::NAMESPACE_ORDER_TOPIC_CONFIG;

pub(crate) const CODES: &[RequestCode] = &[RequestCode::GetRouteinfoByTopic];

/// RocketMQ's hint appended to the TOPIC_NOT_EXIST remark (`FAQUrl.suggestTodo(APPLY_TOPIC_URL)`).
pub const TOPIC_NOT_EXIST_HINT: &str =
    "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

pub(crate) struct RouteProcessor {
    ctx: Arc<NamesrvContext>,
}

impl RouteProcessor {
    pub(crate) fn new(ctx: &Arc<NamesrvContext>) -> Self {
        Self {
            ctx: Arc::clone(ctx),
        }
    }
}

impl RequestProcessor for RouteProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        respond(match RequestCode::from(request.code) {
            RequestCode::GetRouteinfoByTopic => route_by_topic(&self.ctx, &request),
            _ => Err(not_supported(request.code)),
        })
    }
}

pub(crate) fn route_by_topic(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: GetRouteInfoRequestHeader = decode_header(request)?;
    let Some(mut route) = ctx.route.pickup_topic_route(&header.topic) else {
        return Err(failure(
            ResponseCode::TopicNotExist,
            format!(
                "No topic route info in name server for the topic: {}{TOPIC_NOT_EXIST_HINT}",
                header.topic
            ),
        ));
    };
    if ctx
        .order_message_enable
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        route.order_topic_conf = ctx.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, &header.topic);
    }
    let standard =
        TopicRouteData::wants_standard_json(request.version, header.accept_standard_json_only);
    let body = route.encode(standard).map_err(|e| {
        failure(
            ResponseCode::SystemError,
            format!("encoding the route failed: {e}"),
        )
    })?;
    Ok(success().with_body(body))
}

#[cfg(test)]
mod tests {
    use comet_protocol::body::{TopicConfig, TopicConfigSerializeWrapper};
    use comet_protocol::headers::request_with_header;

    use super::*;
    use crate::processor::test_support::context;
    use crate::route_info::BrokerRegistration;

    fn get_route(topic: &str, version: i32, standard: Option<bool>) -> RemotingCommand {
        let mut req = request_with_header(
            RequestCode::GetRouteinfoByTopic,
            &GetRouteInfoRequestHeader {
                topic: topic.into(),
                accept_standard_json_only: standard,
                ..Default::default()
            },
        );
        req.version = version;
        req
    }

    #[test]
    fn json_form_follows_version_and_flag_and_order_conf_is_added() {
        let (ctx, _dir) = context();
        let mut wrapper = TopicConfigSerializeWrapper::default();
        for t in ["T1", "T2"] {
            wrapper
                .topic_config_table
                .insert(t.into(), TopicConfig::with_queues(t, 4, 4, 6));
        }
        ctx.route
            .register_broker(BrokerRegistration {
                cluster_name: "C".into(),
                broker_addr: "127.0.0.1:10911".into(),
                broker_name: "broker-a".into(),
                topic_config_wrapper: wrapper,
                ..Default::default()
            })
            .unwrap();
        let text = |rsp: RemotingCommand| {
            String::from_utf8(rsp.body.unwrap_or_default().to_vec()).unwrap_or_default()
        };
        let legacy = text(route_by_topic(&ctx, &get_route("T1", 317, None)).unwrap());
        assert!(
            legacy.contains(r#""brokerAddrs":{0:"127.0.0.1:10911"}"#),
            "{legacy}"
        );
        assert!(!legacy.contains("orderTopicConf"));
        let flagged = text(route_by_topic(&ctx, &get_route("T1", 317, Some(true))).unwrap());
        assert!(
            flagged.contains(r#""brokerAddrs":{"0":"127.0.0.1:10911"}"#),
            "{flagged}"
        );
        let modern = text(route_by_topic(&ctx, &get_route("T1", 401, None)).unwrap());
        assert_eq!(modern, flagged);

        ctx.kv
            .put(NAMESPACE_ORDER_TOPIC_CONFIG, "T1", "broker-a:4")
            .unwrap();
        let ordered = text(route_by_topic(&ctx, &get_route("T1", 479, None)).unwrap());
        assert!(
            ordered.contains(r#""orderTopicConf":"broker-a:4""#),
            "{ordered}"
        );
    }

    #[test]
    fn unknown_topic_and_missing_header() {
        let (ctx, _dir) = context();
        let rsp = route_by_topic(&ctx, &get_route("Nope", 479, None))
            .unwrap_err()
            .into_response();
        assert_eq!(rsp.code, 17);
        let remark = rsp.remark.unwrap_or_default();
        assert!(remark.starts_with("No topic route info in name server for the topic: Nope\nSee "));
        let rsp = route_by_topic(
            &ctx,
            &RemotingCommand::request(RequestCode::GetRouteinfoByTopic),
        )
        .unwrap_err()
        .into_response();
        assert_eq!(rsp.code, 1);
        assert!(rsp.remark.unwrap_or_default().contains("`topic`"));
    }
}
