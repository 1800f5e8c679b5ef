//! `MQAdmin::reset_offset` against a broker that refuses to reset a group nobody of which is
//! online (CONSUMER_NOT_ONLINE, as an Apache broker that leaves resets to the clients answers):
//! the admin then commits each queue's target offset itself, as mqadmin's fallback does. A relay
//! in front of the broker stands for that broker.

use std::net::{IpAddr, SocketAddr};

use comet_client::admin::{MQAdmin, RESET_TO_END, TopicTarget};
use comet_protocol::body::SubscriptionGroupConfig;
use comet_protocol::code::{RequestCode, ResponseCode};
use comet_testkit::client::*;
use comet_testkit::wiretap::{RELAY_IP, Wiretap};

const TOPIC: &str = "OfflineResetTopic";
const GROUP: &str = "offline_reset_group";
const QUEUES: i32 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reset_falls_back_to_committing_each_queue() {
    let relay_ip: IpAddr = RELAY_IP.parse().expect("literal IP");
    let cluster = Cluster::start_with(|c| c.broker_ip1 = Some(relay_ip)).await;
    let bound = cluster.broker().local_addr();
    let tap = Wiretap::start(SocketAddr::new(relay_ip, bound.port()), bound).await;
    cluster.create_topic(TOPIC, QUEUES).await;
    let producer = producer(&cluster).await;
    send_bodies(
        &producer,
        TOPIC,
        &cluster.broker_name(),
        None,
        QUEUES,
        "m",
        6,
    )
    .await;
    producer.shutdown().await;
    cluster.wait_dispatched().await;

    let admin = MQAdmin::new(client_config(&cluster, "offline-reset-admin")).expect("admin");
    admin
        .update_subscription_group(
            &TopicTarget::Broker(cluster.broker_addr()),
            &SubscriptionGroupConfig::new(GROUP),
        )
        .await
        .expect("group created");
    // The broker itself resets a group with nobody online: the end of every queue.
    let direct = admin
        .reset_offset(GROUP, TOPIC, RESET_TO_END, true)
        .await
        .expect("reset through the broker");
    assert!(!direct.offline);
    for q in 0..QUEUES {
        assert_eq!(cluster.committed_offset(GROUP, TOPIC, q), 3);
    }

    // Refused: the admin commits the offsets found by time (0: the start of each queue).
    tap.refuse(
        RequestCode::InvokeBrokerToResetOffset,
        1,
        ResponseCode::ConsumerNotOnline,
    );
    let fallback = admin
        .reset_offset(GROUP, TOPIC, 0, true)
        .await
        .expect("reset through the fallback");
    assert_eq!(tap.refusals_left(), 0, "the broker was asked first");
    assert!(fallback.offline);
    assert_eq!(fallback.offsets.len(), 2);
    assert!(fallback.offsets.values().all(|o| *o == 0), "{fallback:?}");
    for q in 0..QUEUES {
        assert_eq!(cluster.committed_offset(GROUP, TOPIC, q), 0);
    }
    assert_eq!(tap.requests(RequestCode::UpdateConsumerOffset).len(), 2);

    // Without force, a queue already before the target keeps its offset.
    tap.refuse(
        RequestCode::InvokeBrokerToResetOffset,
        1,
        ResponseCode::ConsumerNotOnline,
    );
    let kept = admin
        .reset_offset(GROUP, TOPIC, RESET_TO_END, false)
        .await
        .expect("reset without force");
    assert!(kept.offline);
    assert!(kept.offsets.values().all(|o| *o == 0), "{kept:?}");
    // Any other refusal is the caller's error.
    tap.refuse(
        RequestCode::InvokeBrokerToResetOffset,
        1,
        ResponseCode::SystemError,
    );
    assert!(admin.reset_offset(GROUP, TOPIC, 0, true).await.is_err());
    admin.shutdown().await;
    cluster.shutdown().await;
}
