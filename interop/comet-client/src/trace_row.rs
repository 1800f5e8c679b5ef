//! The message trace row: Comet's client with trace on against Apache RocketMQ, checked by
//! Comet's decoder on what Apache stored and by Apache's own `mqadmin queryMsgTraceById`.

use std::process::Command;

use comet_client::consumer::push::PushConsumerConfig;
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere};
use comet_client::producer::{DefaultMQProducer, ProducerConfig};
use comet_client::trace::{self, RMQ_SYS_TRACE_TOPIC, TraceContext, TraceType};
use comet_client::{Message, SendStatus};
use tokio::sync::mpsc;

use crate::ensure;
use crate::support::{
    Ctx, DEADLINE, Outcome, POLL, QUEUES, Step, collect_until, push_consumer, reporting_listener,
};

/// The environment variable naming the classpath of Apache's tools (run.sh sets it).
pub const APACHE_CLASSPATH_ENV: &str = "APACHE_CLASSPATH";

/// A traced producer and a traced push consumer; Pub, SubBefore and SubAfter records of the
/// message must be in Apache's trace topic, decodable by Comet and by mqadmin.
pub async fn message_trace(ctx: Ctx) -> Outcome {
    let classpath = std::env::var(APACHE_CLASSPATH_ENV).map_err(|_| {
        format!("{APACHE_CLASSPATH_ENV} (Apache's classpath, for mqadmin) is not set")
    })?;
    let topic = ctx.topic("Trace");
    ctx.create_topic(&topic, QUEUES).await?;
    let consumer_group = ctx.group("trace_c");
    let mut config = PushConsumerConfig::new(consumer_group.clone());
    config.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
    config.enable_msg_trace = true;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let listener = reporting_listener(0, tx, ConsumeConcurrentlyStatus::ConsumeSuccess);
    let consumer = push_consumer(config, ctx.client("trace-c"), &topic, "*", listener).await?;

    let producer_group = ctx.group("trace_p");
    let mut config = ProducerConfig::new(producer_group.clone(), ctx.namesrv.clone());
    config.client = ctx.client("trace-p");
    config.enable_msg_trace = true;
    let producer = DefaultMQProducer::new(config);
    producer.start().await.step("producer start")?;
    let msg = Message::new(topic.clone(), "traced")
        .with_tags("TagT")
        .with_keys([format!("trace-key-{}", ctx.suffix)]);
    let sent = producer.send(msg).await.step("send");
    // Shutdown sends the queued Pub event.
    producer.shutdown().await;
    let sent = sent?;
    ensure!(
        sent.send_status == SendStatus::SendOk,
        "send: {:?}",
        sent.send_status
    );
    let msg_id = sent.msg_id.clone();
    let got = collect_until(&mut rx, DEADLINE, |g| {
        g.iter().any(|(_, m)| m.msg_id() == msg_id)
    })
    .await;
    consumer.shutdown().await;
    ensure!(
        got.iter().any(|(_, m)| m.msg_id() == msg_id),
        "message {msg_id} not consumed"
    );

    let records = stored_records(&ctx, &msg_id).await?;
    let find = |t: TraceType| records.iter().find(|r| r.trace_type == t);
    let (Some(publish), Some(before), Some(after)) = (
        find(TraceType::Pub),
        find(TraceType::SubBefore),
        find(TraceType::SubAfter),
    ) else {
        return Err(format!("trace records of {msg_id} incomplete: {records:?}"));
    };
    ensure!(
        publish.group_name == producer_group
            && publish.success
            && publish.beans[0].topic == topic
            && publish.beans[0].tags.as_deref() == Some("TagT")
            && publish.beans[0].offset_msg_id == sent.offset_msg_id,
        "Pub record {publish:?}"
    );
    ensure!(
        before.group_name == consumer_group && after.request_id == before.request_id,
        "SubBefore {before:?} / SubAfter {after:?}"
    );
    ensure!(
        after.success && after.group_name == consumer_group,
        "SubAfter {after:?}"
    );

    let shown = mqadmin_trace(&classpath, &ctx.namesrv, &msg_id).await?;
    ensure!(
        shown.contains("Pub") && shown.contains(&producer_group) && shown.contains(&consumer_group),
        "mqadmin queryMsgTraceById printed: {shown}"
    );
    Ok(())
}

/// The records of `msg_id` in the default trace topic, once Pub, SubBefore and SubAfter are
/// all indexed (or what was found at the deadline).
async fn stored_records(ctx: &Ctx, msg_id: &str) -> Result<Vec<TraceContext>, String> {
    let admin = ctx.admin()?;
    let wanted = [TraceType::Pub, TraceType::SubBefore, TraceType::SubAfter];
    let begin = std::time::Instant::now();
    let records = loop {
        let records = trace::query_traces(&admin, RMQ_SYS_TRACE_TOPIC, msg_id)
            .await
            .unwrap_or_default();
        let complete = wanted
            .iter()
            .all(|t| records.iter().any(|r| r.trace_type == *t));
        if complete || begin.elapsed() > DEADLINE {
            break records;
        }
        tokio::time::sleep(POLL).await;
    };
    admin.shutdown().await;
    Ok(records)
}

/// What `mqadmin queryMsgTraceById -i MSG_ID -n NAMESRV` (Apache's tools) prints.
async fn mqadmin_trace(classpath: &str, namesrv: &str, msg_id: &str) -> Result<String, String> {
    let mut command = Command::new("java");
    command.args([
        "-Xmx128m",
        "-cp",
        classpath,
        "org.apache.rocketmq.tools.command.MQAdminStartup",
        "queryMsgTraceById",
        "-i",
        msg_id,
        "-n",
        namesrv,
    ]);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .step("mqadmin task")?
        .step("running mqadmin")?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(
        output.status.success(),
        "mqadmin exited {}: {stdout} {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(stdout)
}
