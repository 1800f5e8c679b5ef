//! Message trace end to end, against an in-process Comet name server and broker: a traced
//! producer and a traced push consumer leave Pub, SubBefore and SubAfter records in the trace
//! topic, found by querying the message id as a key and decoded with the right fields.

use comet_client::admin::MQAdmin;
use comet_client::consumer::ConsumeConcurrentlyStatus;
use comet_client::producer::{
    DefaultMQProducer, LocalTransactionState, ProducerConfig, TransactionListener,
    TransactionProducer,
};
use comet_client::trace::{self, MessageType, RMQ_SYS_TRACE_TOPIC, TraceContext, TraceType};
use comet_client::{ClientConfig, Message, SendStatus};
use comet_testkit::client::*;

fn traced_producer(cluster: &Cluster, group: &str, trace_topic: Option<&str>) -> DefaultMQProducer {
    let mut config = ProducerConfig::new(group, cluster.namesrv_addr());
    config.client = client_config(cluster, &unique_instance("traced-producer"));
    config.enable_msg_trace = true;
    config.custom_trace_topic = trace_topic.map(str::to_owned);
    DefaultMQProducer::new(config)
}

/// Polls the trace topic until the records of `msg_id` include every type in `wanted`.
async fn traces_of(
    admin: &MQAdmin,
    trace_topic: &str,
    msg_id: &str,
    wanted: &[TraceType],
) -> Vec<TraceContext> {
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    let mut found = Vec::new();
    loop {
        if let Ok(records) = trace::query_traces(admin, trace_topic, msg_id).await {
            found = records;
        }
        if wanted
            .iter()
            .all(|t| found.iter().any(|r| r.trace_type == *t))
        {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "trace records of {msg_id} in {trace_topic}: {found:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

fn record(records: &[TraceContext], trace_type: TraceType) -> &TraceContext {
    records
        .iter()
        .find(|r| r.trace_type == trace_type)
        .expect("record present")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traced_producer_and_consumer_leave_pub_sub_before_and_sub_after_records() {
    let cluster = Cluster::start().await;
    let topic = "TraceE2E";
    cluster.create_topic(topic, 1).await;
    let producer = traced_producer(&cluster, "pg-trace", None);
    producer.start().await.expect("producer starts");

    let mut consumer_config = consumer_config(&cluster, "cg-trace", &unique_instance("traced-c"));
    consumer_config.enable_msg_trace = true;
    let (listener, mut rx) =
        reporting_listener_with("c", None, |_| ConsumeConcurrentlyStatus::ConsumeSuccess);
    let consumer = start_consumer(consumer_config, topic, listener).await;

    let msg = Message::new(topic, b"traced body".to_vec())
        .with_tags("TagT")
        .with_keys(["order-7", "user-9"]);
    let sent = producer.send(msg).await.expect("send");
    assert_eq!(sent.send_status, SendStatus::SendOk);
    let async_sent = producer
        .send_async(Message::new(topic, b"async".to_vec()))
        .await
        .expect("async send");
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &["traced body".to_owned()]).await;

    let admin = MQAdmin::new(ClientConfig::new(cluster.namesrv_addr())).expect("admin");
    let wanted = [TraceType::Pub, TraceType::SubBefore, TraceType::SubAfter];
    let records = traces_of(&admin, RMQ_SYS_TRACE_TOPIC, &sent.msg_id, &wanted).await;

    let publish = record(&records, TraceType::Pub);
    assert_eq!(publish.group_name, "pg-trace");
    assert_eq!(publish.region_id, "DefaultRegion");
    assert!(publish.success);
    let bean = &publish.beans[0];
    assert_eq!(bean.topic, topic);
    assert_eq!(bean.msg_id, sent.msg_id);
    assert_eq!(bean.offset_msg_id, sent.offset_msg_id);
    assert_eq!(bean.tags.as_deref(), Some("TagT"));
    assert_eq!(bean.keys.as_deref(), Some("order-7 user-9"));
    assert_eq!(bean.store_host, cluster.broker_addr());
    assert_eq!(bean.body_length, 11);
    assert_eq!(bean.msg_type, MessageType::NormalMsg);

    let before = record(&records, TraceType::SubBefore);
    let after = record(&records, TraceType::SubAfter);
    assert_eq!(before.group_name, "cg-trace");
    assert_eq!(before.region_id, "DefaultRegion");
    assert!(!before.request_id.is_empty());
    assert_eq!(before.beans[0].retry_times, 0);
    assert_eq!(before.beans[0].keys.as_deref(), Some("order-7 user-9"));
    assert_eq!(after.request_id, before.request_id);
    assert_eq!(after.group_name, "cg-trace");
    assert!(after.success);
    assert_eq!(after.context_code, 0, "SUCCESS");
    assert_eq!(after.beans[0].msg_id, sent.msg_id);

    // The trace messages are indexed under the message's keys too.
    let by_key = admin
        .query_message_by_key(RMQ_SYS_TRACE_TOPIC, "order-7", 64, 0, i64::MAX)
        .await
        .expect("query by key");
    assert!(!by_key.is_empty());
    // An async send is traced like a sync one.
    traces_of(
        &admin,
        RMQ_SYS_TRACE_TOPIC,
        &async_sent.msg_id,
        &[TraceType::Pub],
    )
    .await;

    let dispatcher = producer.trace_dispatcher().expect("traced producer");
    assert_eq!(dispatcher.discard_count(), 0);
    consumer.shutdown().await;
    producer.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_consumption_and_a_custom_trace_topic_are_traced() {
    let cluster = Cluster::start().await;
    let topic = "TraceFailed";
    let trace_topic = "MyTraceTopic";
    cluster.create_topic(topic, 1).await;
    let producer = traced_producer(&cluster, "pg-trace-custom", Some(trace_topic));
    producer.start().await.expect("producer starts");
    let mut consumer_config = consumer_config(&cluster, "cg-trace-fail", &unique_instance("tf"));
    consumer_config.enable_msg_trace = true;
    consumer_config.custom_trace_topic = Some(trace_topic.to_owned());
    let (listener, mut rx) = reporting_listener_with("c", None, |m| {
        if m.reconsume_times == 0 {
            ConsumeConcurrentlyStatus::ReconsumeLater
        } else {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    });
    let consumer = start_consumer(consumer_config, topic, listener).await;
    let sent = producer
        .send(Message::new(topic, b"fails once".to_vec()))
        .await
        .expect("send");
    let mut seen = Vec::new();
    collect_bodies(&mut rx, &mut seen, &["fails once".to_owned()]).await;

    let admin = MQAdmin::new(ClientConfig::new(cluster.namesrv_addr())).expect("admin");
    let wanted = [TraceType::Pub, TraceType::SubAfter];
    let records = traces_of(&admin, trace_topic, &sent.msg_id, &wanted).await;
    let failed = records
        .iter()
        .find(|r| r.trace_type == TraceType::SubAfter)
        .expect("SubAfter");
    assert!(!failed.success);
    assert_eq!(failed.context_code, 4, "FAILED");
    // Nothing went to the default trace topic.
    assert!(
        trace::query_traces(&admin, RMQ_SYS_TRACE_TOPIC, &sent.msg_id)
            .await
            .map(|r| r.is_empty())
            .unwrap_or(true)
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_flushes_queued_trace_events() {
    let cluster = Cluster::start().await;
    let topic = "TraceFlush";
    cluster.create_topic(topic, 1).await;
    let producer = traced_producer(&cluster, "pg-trace-flush", None);
    producer.start().await.expect("producer starts");
    let mut ids = Vec::new();
    for i in 0..25 {
        let sent = producer
            .send(Message::new(topic, format!("m{i}").into_bytes()))
            .await
            .expect("send");
        ids.push(sent.msg_id);
    }
    producer.shutdown().await;
    let admin = MQAdmin::new(ClientConfig::new(cluster.namesrv_addr())).expect("admin");
    // Right after shutdown (and the broker's indexing), every event is stored: shutdown waited
    // for the queue to drain.
    cluster.wait_dispatched().await;
    for id in &ids {
        let records = trace::query_traces(&admin, RMQ_SYS_TRACE_TOPIC, id)
            .await
            .expect("query");
        assert_eq!(records.len(), 1, "Pub of {id}");
    }
    admin.shutdown().await;
    cluster.shutdown().await;
}

struct CommitAll;

impl TransactionListener for CommitAll {
    fn execute_local_transaction(
        &self,
        _msg: &Message,
        _arg: &(dyn std::any::Any + Send + Sync),
    ) -> LocalTransactionState {
        LocalTransactionState::CommitMessage
    }

    fn check_local_transaction(&self, _msg: &comet_client::MessageExt) -> LocalTransactionState {
        LocalTransactionState::CommitMessage
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_transaction_leaves_pub_and_end_transaction_records() {
    let cluster = Cluster::start().await;
    let topic = "TraceTx";
    cluster.create_topic(topic, 1).await;
    let mut config = ProducerConfig::new("pg-trace-tx", cluster.namesrv_addr());
    config.client = client_config(&cluster, &unique_instance("traced-tx"));
    config.enable_msg_trace = true;
    let producer = TransactionProducer::new(config, std::sync::Arc::new(CommitAll));
    producer.start().await.expect("producer starts");
    let msg = Message::new(topic, b"tx".to_vec()).with_tags("TxTag");
    let sent = producer
        .send_message_in_transaction(msg, &())
        .await
        .expect("transactional send");
    let msg_id = sent.send_result.msg_id.clone();

    let admin = MQAdmin::new(ClientConfig::new(cluster.namesrv_addr())).expect("admin");
    let wanted = [TraceType::Pub, TraceType::EndTransaction];
    let records = traces_of(&admin, RMQ_SYS_TRACE_TOPIC, &msg_id, &wanted).await;
    let half = record(&records, TraceType::Pub);
    assert_eq!(half.beans[0].msg_type, MessageType::TransMsgHalf);
    let end = record(&records, TraceType::EndTransaction);
    assert_eq!(end.group_name, "pg-trace-tx");
    assert_eq!(end.region_id, "DefaultRegion");
    let bean = &end.beans[0];
    assert_eq!(bean.topic, topic);
    assert_eq!(bean.tags.as_deref(), Some("TxTag"));
    assert_eq!(bean.msg_type, MessageType::TransMsgCommit);
    assert_eq!(bean.transaction_state.as_deref(), Some("COMMIT_MESSAGE"));
    assert_eq!(bean.transaction_id.as_deref(), Some(msg_id.as_str()));
    assert!(!bean.from_transaction_check);
    producer.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_lite_pull_consumer_records_sub_before_and_sub_after() {
    use comet_client::consumer::ConsumeFromWhere;
    use comet_client::consumer::lite::{DefaultLitePullConsumer, LitePullConsumerConfig};

    let cluster = Cluster::start().await;
    let topic = "TraceLite";
    cluster.create_topic(topic, 1).await;
    let producer = producer(&cluster).await;
    let sent = producer
        .send(Message::new(topic, b"polled".to_vec()))
        .await
        .expect("send");
    producer.shutdown().await;

    let mut config = LitePullConsumerConfig::new(
        "cg-trace-lite",
        client_config(&cluster, &unique_instance("lite")),
    );
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    config.enable_msg_trace = true;
    let consumer = DefaultLitePullConsumer::new(config);
    consumer.subscribe(topic, "*").await.expect("subscribe");
    consumer.start().await.expect("lite consumer starts");
    let deadline = tokio::time::Instant::now() + WAIT_DEADLINE;
    loop {
        let got = consumer
            .poll(std::time::Duration::from_millis(200))
            .await
            .expect("poll");
        if got.iter().any(|m| m.msg_id() == sent.msg_id) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "message not polled");
    }
    consumer.shutdown().await;

    let admin = MQAdmin::new(ClientConfig::new(cluster.namesrv_addr())).expect("admin");
    let wanted = [TraceType::SubBefore, TraceType::SubAfter];
    let records = traces_of(&admin, RMQ_SYS_TRACE_TOPIC, &sent.msg_id, &wanted).await;
    let before = record(&records, TraceType::SubBefore);
    let after = record(&records, TraceType::SubAfter);
    assert_eq!(before.group_name, "cg-trace-lite");
    assert_eq!(after.request_id, before.request_id);
    assert!(after.success);
    admin.shutdown().await;
    cluster.shutdown().await;
}
