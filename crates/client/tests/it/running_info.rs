//! A running push consumer answers the admin requests a broker relays to one client:
//! GET_CONSUMER_RUNNING_INFO (its queues, subscriptions, statistics, properties) and
//! CONSUME_MESSAGE_DIRECTLY (one chosen stored message handed to its listener once), over a real
//! name server and broker.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use comet_client::ClientConfig;
use comet_client::admin::MQAdmin;
use comet_client::consumer::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MessageExt, MessageListener,
    MessageListenerConcurrently, MessageQueue,
};
use comet_client::message::Message;
use comet_protocol::body::CMResult;
use comet_protocol::body::running::{
    PROP_CLIENT_VERSION, PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR,
};
use comet_testkit::client::*;
use futures::future::BoxFuture;

/// Counts every message it sees and panics on a body of `boom`.
struct Counting {
    seen: Arc<AtomicUsize>,
    bodies: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl MessageListenerConcurrently for Counting {
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        _ctx: &'a mut ConsumeConcurrentlyContext,
    ) -> BoxFuture<'a, ConsumeConcurrentlyStatus> {
        Box::pin(async move {
            for msg in msgs {
                let body = String::from_utf8_lossy(&msg.body).into_owned();
                self.seen.fetch_add(1, Ordering::SeqCst);
                self.bodies.lock().push(body.clone());
                assert!(body != "boom", "listener refuses boom");
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_info_and_direct_consumption_through_the_broker() {
    let cluster = Cluster::start().await;
    let topic = "RunInfoTopic";
    let group = "run_info_group";
    cluster.create_topic(topic, 2).await;
    let broker = cluster.broker_name();
    let producer = producer(&cluster).await;
    let mut sent = Vec::new();
    for (body, tag) in [("m-0", "TagA"), ("m-1", "TagA"), ("boom", "TagB")] {
        let msg = Message::new(topic, body.as_bytes().to_vec()).with_tags(tag);
        let mq = MessageQueue::new(topic, &broker, 0);
        sent.push(producer.send_to_queue(msg, &mq).await.expect("send"));
    }

    // The consumer takes TagA only: the TagB message is stored but never delivered by pulls.
    let seen = Arc::new(AtomicUsize::new(0));
    let bodies = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let listener = Counting {
        seen: Arc::clone(&seen),
        bodies: Arc::clone(&bodies),
    };
    let consumer = comet_client::consumer::push::DefaultMQPushConsumer::new(consumer_config(
        &cluster,
        group,
        &unique_instance("runinfo"),
    ));
    consumer.subscribe(topic, "TagA").await.expect("subscribe");
    consumer.register_message_listener(MessageListener::Concurrently(Arc::new(listener)));
    consumer.start().await.expect("consumer starts");
    let client_id = consumer.client_id().expect("started");
    assert!(
        wait_until(|| {
            let n = seen.load(Ordering::SeqCst);
            async move { n == 2 }
        })
        .await
    );

    let admin = MQAdmin::new(ClientConfig::new(cluster.namesrv_addr())).expect("admin client");
    let mq0 = MessageQueue::new(topic, &broker, 0);
    // The committed offset of queue 0 reaches 3 (the filtered message is passed over too).
    let info = Arc::new(parking_lot::Mutex::new(None));
    assert!(
        wait_until(|| {
            let (admin, client_id, info, mq0) =
                (&admin, client_id.clone(), Arc::clone(&info), mq0.clone());
            async move {
                let got = admin
                    .consumer_running_info(group, &client_id, false)
                    .await
                    .expect("running info");
                let done = got.mq_table.get(&mq0).is_some_and(|q| q.commit_offset == 3)
                    && got.mq_table.keys().filter(|mq| mq.topic == topic).count() == 2;
                *info.lock() = Some(got);
                done
            }
        })
        .await,
        "running info shows both queues and the committed offset: {:?}",
        info.lock()
    );
    let info = info.lock().take().expect("answered");
    assert_eq!(info.property(PROP_CONSUME_TYPE), Some("CONSUME_PASSIVELY"));
    assert_eq!(info.property(PROP_CONSUME_ORDERLY), Some("false"));
    assert_eq!(info.property(PROP_CLIENT_VERSION), Some("V5_3_3"));
    assert_eq!(
        info.property(PROP_NAMESERVER_ADDR),
        Some(format!("{};", cluster.namesrv_addr()).as_str())
    );
    assert_eq!(info.property("consumerGroup"), Some(group));
    assert_eq!(info.property("messageModel"), Some("CLUSTERING"));
    let topics: Vec<&str> = info
        .subscription_set
        .iter()
        .map(|s| s.topic.as_str())
        .collect();
    assert_eq!(topics, vec!["%RETRY%run_info_group", topic]);
    assert!(info.status_table.contains_key(topic), "{info:?}");
    assert!(info.jstack.is_none());
    let mq_info = &info.mq_table[&mq0];
    assert!(
        !mq_info.droped && mq_info.last_pull_timestamp > 0,
        "{mq_info:?}"
    );

    let dumped = admin
        .consumer_running_info(group, &client_id, true)
        .await
        .expect("running info with a dump");
    assert!(
        dumped
            .jstack
            .as_deref()
            .is_some_and(|j| j.contains(&client_id)),
        "{:?}",
        dumped.jstack
    );

    // A chosen stored message goes to the listener once, whatever its tag.
    let result = admin
        .consume_message_directly(group, &client_id, &sent[0].offset_msg_id, Some(topic))
        .await
        .expect("direct consumption");
    assert_eq!(result.consume_result, Some(CMResult::Success));
    assert!(!result.order && result.auto_commit);
    assert_eq!(seen.load(Ordering::SeqCst), 3);
    assert_eq!(bodies.lock().last().map(String::as_str), Some("m-0"));

    let result = admin
        .consume_message_directly(group, &client_id, &sent[2].offset_msg_id, None)
        .await
        .expect("direct consumption of the filtered message");
    assert_eq!(result.consume_result, Some(CMResult::ThrowException));
    assert!(
        result
            .remark
            .as_deref()
            .is_some_and(|r| r.contains("listener refuses boom")),
        "{result:?}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 4);

    admin.shutdown().await;
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_is_not_connected_is_reported_not_online() {
    let cluster = Cluster::start().await;
    let topic = "RunInfoOffline";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let sent = producer
        .send(Message::new(topic, b"x".to_vec()))
        .await
        .expect("send");
    let admin = MQAdmin::new(ClientConfig::new(cluster.namesrv_addr())).expect("admin client");

    let err = admin
        .consumer_running_info("offline_group", "127.0.0.1@nobody", false)
        .await
        .expect_err("no such client");
    assert!(
        err.to_string()
            .contains("The Consumer <offline_group> <127.0.0.1@nobody> not online"),
        "{err}"
    );
    let err = admin
        .consume_message_directly(
            "offline_group",
            "127.0.0.1@nobody",
            &sent.offset_msg_id,
            None,
        )
        .await
        .expect_err("no such client");
    assert!(err.to_string().contains("not online"), "{err}");

    admin.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}

/// An orderly listener that turns auto-commit off and asks to suspend on a body of `hold`.
struct Holding {
    seen: Arc<AtomicUsize>,
}

impl comet_client::consumer::MessageListenerOrderly for Holding {
    fn consume_message<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        ctx: &'a mut comet_client::consumer::ConsumeOrderlyContext,
    ) -> BoxFuture<'a, comet_client::consumer::ConsumeOrderlyStatus> {
        Box::pin(async move {
            self.seen.fetch_add(msgs.len(), Ordering::SeqCst);
            if msgs.iter().any(|m| m.body.as_ref() == b"hold") {
                ctx.auto_commit = false;
                return comet_client::consumer::ConsumeOrderlyStatus::SuspendCurrentQueueAMoment;
            }
            comet_client::consumer::ConsumeOrderlyStatus::Success
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orderly_consumer_reports_its_listener_outcome_and_auto_commit() {
    let cluster = Cluster::start().await;
    let topic = "RunInfoOrderly";
    let group = "run_info_orderly";
    cluster.create_topic(topic, 1).await;
    let broker = cluster.broker_name();
    let producer = producer(&cluster).await;
    let mq = MessageQueue::new(topic, &broker, 0);
    // Only TagA is subscribed: the held message is reached by direct consumption alone.
    let held = producer
        .send_to_queue(Message::new(topic, b"hold".to_vec()).with_tags("TagB"), &mq)
        .await
        .expect("send");
    producer
        .send_to_queue(Message::new(topic, b"go".to_vec()).with_tags("TagA"), &mq)
        .await
        .expect("send");

    let seen = Arc::new(AtomicUsize::new(0));
    let consumer = comet_client::consumer::push::DefaultMQPushConsumer::new(consumer_config(
        &cluster,
        group,
        &unique_instance("runinfo-orderly"),
    ));
    consumer.subscribe(topic, "TagA").await.expect("subscribe");
    consumer.register_message_listener(MessageListener::Orderly(Arc::new(Holding {
        seen: Arc::clone(&seen),
    })));
    consumer.start().await.expect("consumer starts");
    let client_id = consumer.client_id().expect("started");
    assert!(
        wait_until(|| {
            let n = seen.load(Ordering::SeqCst);
            async move { n == 1 }
        })
        .await
    );

    let admin = MQAdmin::new(ClientConfig::new(cluster.namesrv_addr())).expect("admin client");
    let info = admin
        .consumer_running_info(group, &client_id, false)
        .await
        .expect("running info");
    assert_eq!(info.property(PROP_CONSUME_ORDERLY), Some("true"));
    let result = admin
        .consume_message_directly(group, &client_id, &held.offset_msg_id, None)
        .await
        .expect("direct consumption");
    assert_eq!(result.consume_result, Some(CMResult::Later));
    assert!(result.order && !result.auto_commit, "{result:?}");
    assert_eq!(seen.load(Ordering::SeqCst), 2);

    admin.shutdown().await;
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await;
}
