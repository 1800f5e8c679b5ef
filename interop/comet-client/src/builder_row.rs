//! The builder row: push consumers made with `DefaultMQPushConsumer::builder` and an async
//! listener, two of one group in one process under default instance names (`pid#nanos`, so two
//! client instances and no duplicate-group refusal), and `reset_offset_by_timestamp` rewinding a
//! running consumer to a time in the middle of its backlog.

use std::sync::Arc;

use comet_client::consumer::push::DefaultMQPushConsumer;
use comet_client::consumer::{ConsumeConcurrentlyStatus, ConsumeFromWhere, MessageListener};
use tokio::sync::mpsc;

use crate::ensure;
use crate::support::{
    Ctx, DEADLINE, Delivery, Outcome, QUEUES, Step, body_counts, collect_until, now_millis,
    wait_until,
};

/// Bodies sent before and after the reset time.
const COUNT: usize = 8;

/// An async listener that reports every message on `tx` as consumer `who`.
fn async_reporter(who: usize, tx: mpsc::UnboundedSender<Delivery>) -> MessageListener {
    MessageListener::concurrently_async(move |msgs, _ctx| {
        let tx = tx.clone();
        async move {
            for msg in msgs {
                // A closed channel means the scenario already finished.
                let _ = tx.send((who, msg));
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    })
}

async fn send(ctx: &Ctx, topic: &str, bodies: &[String]) -> Outcome {
    let producer = ctx.producer("builder").await?;
    let mut outcome = Ok(());
    for body in bodies {
        let msg = comet_client::Message::new(topic, body.clone());
        if let Err(e) = producer.send(msg).await {
            outcome = Err(format!("send {body}: {e}"));
            break;
        }
    }
    producer.shutdown().await;
    outcome
}

/// Builds, starts and checks two consumers of one group with default instance names.
async fn two_of_one_group(ctx: &Ctx, topic: &str) -> Outcome {
    let group = ctx.group("builder_pair");
    let mut started = Vec::new();
    for who in 0..2 {
        let (tx, _rx) = mpsc::unbounded_channel();
        let consumer = DefaultMQPushConsumer::builder(group.clone())
            .namesrv(ctx.namesrv.clone())
            .subscribe(topic, "*")
            .listener(async_reporter(who, tx))
            .start()
            .await
            .step("start a second consumer of the group in this process")?;
        started.push(consumer);
    }
    let ids: Vec<String> = started.iter().filter_map(|c| c.client_id()).collect();
    for consumer in &started {
        consumer.shutdown().await;
    }
    ensure!(
        ids.len() == 2 && ids[0] != ids[1],
        "two consumers in one process share a client id: {ids:?}"
    );
    Ok(())
}

pub async fn builder_async_reset_by_timestamp(ctx: Ctx) -> Outcome {
    let topic = ctx.topic("Builder");
    ctx.create_topic(&topic, QUEUES).await?;
    two_of_one_group(&ctx, &topic).await?;

    let old: Vec<String> = (0..COUNT).map(|i| format!("builder-old-{i}")).collect();
    send(&ctx, &topic, &old).await?;
    let boundary = now_millis() + 1;
    ensure!(
        wait_until(|| async { now_millis() > boundary }).await,
        "clock did not advance"
    );
    let new: Vec<String> = (0..COUNT).map(|i| format!("builder-new-{i}")).collect();
    send(&ctx, &topic, &new).await?;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let consumer = Arc::new(
        DefaultMQPushConsumer::builder(ctx.group("builder_reset"))
            .client_config(ctx.client("builder-reset"))
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .subscribe(&topic, "*")
            .listener(async_reporter(0, tx))
            .start()
            .await
            .step("builder start")?,
    );
    let outcome = async {
        let all = old.len() + new.len();
        let first = collect_until(&mut rx, DEADLINE, |got| body_counts(got).len() >= all).await;
        ensure!(
            body_counts(&first).len() == all,
            "first pass delivered {} of {all} messages",
            body_counts(&first).len()
        );
        consumer
            .reset_offset_by_timestamp(boundary)
            .await
            .step("reset offset by timestamp")?;
        let again = collect_until(&mut rx, DEADLINE, |got| {
            let counts = body_counts(got);
            new.iter().all(|b| counts.contains_key(b))
        })
        .await;
        let counts = body_counts(&again);
        for body in &new {
            ensure!(counts.contains_key(body), "{body} (after the reset time) not redelivered");
        }
        for body in &old {
            ensure!(!counts.contains_key(body), "{body} (before the reset time) redelivered");
        }
        Ok(())
    }
    .await;
    consumer.shutdown().await;
    outcome
}
