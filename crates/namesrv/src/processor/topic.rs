//! Topic-level commands, mostly from admin tools (`mqadmin topicList`, `deleteTopic`, ...):
//! GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_TOPICS_BY_CLUSTER, GET_SYSTEM_TOPIC_LIST_FROM_NS, the
//! three unit-topic lists, DELETE_TOPIC_IN_NAMESRV and REGISTER_TOPIC_IN_NAMESRV.
//!
//! All lists answer a `{"topicList":[…]}` body (TopicList), sorted.

use std::sync::Arc;

use comet_protocol::RemotingCommand;
use comet_protocol::body::TopicRouteData;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_protocol::headers::{
    DeleteTopicFromNamesrvRequestHeader, GetTopicsByClusterRequestHeader,
    RegisterTopicRequestHeader,
};
use comet_remoting::{Channel, RequestProcessor};
use futures::future::BoxFuture;

use super::{
    NamesrvContext, Reply, decode_header, failure, non_empty, not_supported, respond, success,
    success_json,
};

pub(crate) const CODES: &[RequestCode] = &[
    RequestCode::GetAllTopicListFromNameserver,
    RequestCode::GetTopicsByCluster,
    RequestCode::GetSystemTopicListFromNs,
    RequestCode::GetUnitTopicList,
    RequestCode::GetHasUnitSubTopicList,
    RequestCode::GetHasUnitSubUnunitTopicList,
    RequestCode::DeleteTopicInNamesrv,
    RequestCode::RegisterTopicInNamesrv,
];

pub(crate) struct TopicProcessor {
    ctx: Arc<NamesrvContext>,
}

impl TopicProcessor {
    pub(crate) fn new(ctx: &Arc<NamesrvContext>) -> Self {
        Self {
            ctx: Arc::clone(ctx),
        }
    }
}

impl RequestProcessor for TopicProcessor {
    fn process(
        &self,
        _channel: &Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        let route = &self.ctx.route;
        respond(match RequestCode::from(request.code) {
            RequestCode::GetAllTopicListFromNameserver => success_json(&route.all_topics()),
            RequestCode::GetTopicsByCluster => topics_by_cluster(&self.ctx, &request),
            RequestCode::GetSystemTopicListFromNs => success_json(&route.system_topics()),
            RequestCode::GetUnitTopicList => success_json(&route.unit_topics()),
            RequestCode::GetHasUnitSubTopicList => success_json(&route.has_unit_sub_topics()),
            RequestCode::GetHasUnitSubUnunitTopicList => {
                success_json(&route.has_unit_sub_non_unit_topics())
            }
            RequestCode::DeleteTopicInNamesrv => delete_topic(&self.ctx, &request),
            RequestCode::RegisterTopicInNamesrv => register_topic(&self.ctx, &request),
            _ => Err(not_supported(request.code)),
        })
    }
}

fn topics_by_cluster(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: GetTopicsByClusterRequestHeader = decode_header(request)?;
    success_json(&ctx.route.topics_by_cluster(&header.cluster))
}

pub(crate) fn delete_topic(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: DeleteTopicFromNamesrvRequestHeader = decode_header(request)?;
    non_empty("topic", &header.topic)?;
    let cluster = header
        .cluster_name
        .as_deref()
        .filter(|c| !c.trim().is_empty());
    let removed = ctx.route.delete_topic(&header.topic, cluster);
    tracing::info!(topic = %header.topic, cluster = ?cluster, removed, "topic deleted from the name server");
    Ok(success())
}

fn register_topic(ctx: &NamesrvContext, request: &RemotingCommand) -> Reply {
    let header: RegisterTopicRequestHeader = decode_header(request)?;
    non_empty("topic", &header.topic)?;
    if let Some(body) = request.body.as_deref() {
        let route = TopicRouteData::decode(body).map_err(|e| {
            failure(
                ResponseCode::SystemError,
                format!("REGISTER_TOPIC_IN_NAMESRV: bad TopicRouteData body: {e}"),
            )
        })?;
        ctx.route.register_topic(&header.topic, route.queue_datas);
    }
    Ok(success())
}

#[cfg(test)]
mod tests {
    use comet_protocol::body::{
        QueueData, TopicConfig, TopicConfigSerializeWrapper, TopicList, from_fastjson,
    };
    use comet_protocol::headers::request_with_header;

    use super::*;
    use crate::processor::test_support::context;
    use crate::route_info::BrokerRegistration;

    #[test]
    fn delete_and_register_topic() {
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
                broker_addr: "a:1".into(),
                broker_name: "broker-a".into(),
                topic_config_wrapper: wrapper,
                ..Default::default()
            })
            .unwrap();
        let del = DeleteTopicFromNamesrvRequestHeader {
            topic: "T1".into(),
            cluster_name: Some(String::new()),
            ..Default::default()
        };
        delete_topic(
            &ctx,
            &request_with_header(RequestCode::DeleteTopicInNamesrv, &del),
        )
        .unwrap();
        assert!(ctx.route.pickup_topic_route("T1").is_none());

        let route = TopicRouteData {
            queue_datas: vec![QueueData {
                broker_name: "broker-a".into(),
                read_queue_nums: 1,
                write_queue_nums: 1,
                perm: 6,
                topic_sys_flag: 0,
            }],
            ..Default::default()
        };
        let req = request_with_header(
            RequestCode::RegisterTopicInNamesrv,
            &RegisterTopicRequestHeader {
                topic: "R".into(),
                ..Default::default()
            },
        )
        .with_body(route.encode(false).unwrap_or_default());
        register_topic(&ctx, &req).unwrap();
        let list: TopicList = from_fastjson(
            success_json(&ctx.route.all_topics())
                .unwrap()
                .body
                .as_deref()
                .unwrap_or_default(),
        )
        .unwrap();
        assert_eq!(
            list.topic_list.into_iter().collect::<Vec<_>>(),
            vec!["R", "T2"]
        );

        let bad = request_with_header(
            RequestCode::RegisterTopicInNamesrv,
            &RegisterTopicRequestHeader {
                topic: "R2".into(),
                ..Default::default()
            },
        )
        .with_body(b"[".to_vec());
        assert_eq!(
            register_topic(&ctx, &bad).unwrap_err().into_response().code,
            1
        );
    }
}
