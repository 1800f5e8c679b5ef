//! QueryRoute: the queues of a topic on this broker, each announcing the broker's own gRPC
//! address as its endpoint.
//!
//! The queues are numbered as Apache's proxy numbers them: with a readable and writable topic,
//! `min(read, write)` READ_WRITE queues plus the read-only or write-only surplus; read-only
//! queues come first, then write-only, then READ_WRITE; a topic neither readable nor writable
//! gets NONE queues. With equal read and write counts the ids equal the broker's queue ids.
//! Each queue accepts the message types of the topic's `message.type` attribute (NORMAL when
//! absent, all four when MIXED).

use std::net::SocketAddr;

use comet_grpc_proto::v2;
use comet_protocol::body::{TopicConfig, perm};
use comet_protocol::naming::validate_topic;

use super::message_type::accepted_types;
use super::status;
use comet_broker::context::BrokerContext;

/// Answers `request` from the topic table of `ctx`; `endpoint` is the gRPC address to announce.
pub fn query_route(
    ctx: &BrokerContext,
    endpoint: SocketAddr,
    request: &v2::QueryRouteRequest,
) -> v2::QueryRouteResponse {
    let refuse = |code, message: String| v2::QueryRouteResponse {
        status: Some(status::of(code, message)),
        message_queues: Vec::new(),
    };
    let topic = request.topic.as_ref().map_or("", |t| t.name.as_str());
    if let Err(e) = validate_topic(topic) {
        return refuse(v2::Code::IllegalTopic, format!("topic {topic:?}: {e}"));
    }
    if topic.starts_with(comet_protocol::naming::SYSTEM_TOPIC_PREFIX) {
        return refuse(
            v2::Code::IllegalTopic,
            format!("topic {topic} is a system topic"),
        );
    }
    let Some(config) = ctx.topic_config.select(topic) else {
        return refuse(
            v2::Code::TopicNotFound,
            format!(
                "topic {topic} does not exist on broker {}",
                ctx.config.broker_name
            ),
        );
    };
    let broker = v2::Broker {
        name: ctx.config.broker_name.clone(),
        id: i32::try_from(ctx.config.effective_broker_id()).unwrap_or(i32::MAX),
        endpoints: Some(endpoints_of(endpoint)),
    };
    let resource = v2::Resource {
        resource_namespace: request
            .topic
            .as_ref()
            .map(|t| t.resource_namespace.clone())
            .unwrap_or_default(),
        name: topic.to_owned(),
    };
    let perm = config.perm & ctx.broker_permission();
    v2::QueryRouteResponse {
        status: Some(status::ok()),
        message_queues: message_queues(&config, perm, &resource, &broker),
    }
}

/// The `Endpoints` of one address.
pub fn endpoints_of(addr: SocketAddr) -> v2::Endpoints {
    let scheme = if addr.is_ipv6() {
        v2::AddressScheme::IPv6
    } else {
        v2::AddressScheme::IPv4
    };
    v2::Endpoints {
        scheme: scheme as i32,
        addresses: vec![v2::Address {
            host: addr.ip().to_string(),
            port: i32::from(addr.port()),
        }],
    }
}

/// The queues of `config` under permission `perm`, numbered as the module docs say.
fn message_queues(
    config: &TopicConfig,
    perm: i32,
    topic: &v2::Resource,
    broker: &v2::Broker,
) -> Vec<v2::MessageQueue> {
    let (read, write) = (
        config.read_queue_nums.max(0),
        config.write_queue_nums.max(0),
    );
    let (mut r, mut w, mut rw, mut none) = (0, 0, 0, 0);
    match (perm::is_readable(perm), perm::is_writeable(perm)) {
        (true, true) => {
            rw = read.min(write);
            r = read - rw;
            w = write - rw;
        }
        (false, true) => w = write,
        (true, false) => r = read,
        (false, false) => none = read.max(write).max(1),
    }
    let accept: Vec<i32> = accepted_types(config)
        .into_iter()
        .map(|t| t as i32)
        .collect();
    let kinds = [
        (r, v2::Permission::Read),
        (w, v2::Permission::Write),
        (rw, v2::Permission::ReadWrite),
        (none, v2::Permission::None),
    ];
    kinds
        .into_iter()
        .flat_map(|(n, permission)| {
            std::iter::repeat_n(permission, usize::try_from(n).unwrap_or(0))
        })
        .zip(0..)
        .map(|(permission, id)| v2::MessageQueue {
            topic: Some(topic.clone()),
            id,
            permission: permission as i32,
            broker: Some(broker.clone()),
            accept_message_types: accept.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(read: i32, write: i32, perm: i32) -> Vec<(i32, v2::Permission)> {
        let config = TopicConfig::with_queues("T", read, write, perm);
        message_queues(
            &config,
            perm,
            &v2::Resource::default(),
            &v2::Broker::default(),
        )
        .into_iter()
        .map(|q| (q.id, q.permission()))
        .collect()
    }

    #[test]
    fn queues_are_numbered_read_then_write_then_read_write() {
        use v2::Permission::*;
        assert_eq!(
            queues(2, 2, perm::PERM_READ_WRITE),
            vec![(0, ReadWrite), (1, ReadWrite)]
        );
        assert_eq!(
            queues(3, 1, perm::PERM_READ_WRITE),
            vec![(0, Read), (1, Read), (2, ReadWrite)]
        );
        assert_eq!(
            queues(1, 3, perm::PERM_READ_WRITE),
            vec![(0, Write), (1, Write), (2, ReadWrite)]
        );
        assert_eq!(queues(2, 4, perm::PERM_READ), vec![(0, Read), (1, Read)]);
        assert_eq!(
            queues(2, 4, 0),
            vec![(0, None), (1, None), (2, None), (3, None)]
        );
        assert_eq!(queues(0, 0, 0), vec![(0, None)]);
    }

    #[test]
    fn accepted_types_follow_the_message_type_attribute() {
        let mut config = TopicConfig::with_queues("T", 1, 1, perm::PERM_READ_WRITE);
        assert_eq!(accepted_types(&config), vec![v2::MessageType::Normal]);
        config
            .attributes
            .insert("+message.type".to_owned(), "FIFO".to_owned());
        assert_eq!(accepted_types(&config), vec![v2::MessageType::Fifo]);
        config
            .attributes
            .insert("message.type".to_owned(), "MIXED".to_owned());
        assert_eq!(accepted_types(&config).len(), 4);
    }
}
