//! Oneway and async sends at the maximum rate on one healthy connection: every request the
//! broker read must be stored. The transport's in-flight bound may slow the sender (TCP
//! back-pressure), but nothing a healthy connection delivered may be dropped silently; an async
//! send always gets an answer (stored, or refused with a code such as SYSTEM_BUSY).

use std::time::{Duration, Instant};

use comet_protocol::code::ResponseCode;
use comet_reliability::body::body_for;
use comet_reliability::serve::{FlushMode, Serve, ServeOptions};
use comet_reliability::wire::{self, RPC_TIMEOUT, SendOutcome};
use comet_remoting::{ClientConfig, RemotingClient};
use comet_testkit::process::comet_bin;

const TOPIC: &str = "ReliabilityOnewayTopic";
const QUEUES: i32 = 4;
/// Oneway sends of the flood.
const FLOOD: u64 = 20_000;
/// Hang guard for the store to settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);
const SETTLE_POLL: Duration = Duration::from_millis(50);

async fn stored_count(client: &RemotingClient, addr: &str) -> comet_reliability::Result<i64> {
    let mut total = 0;
    for q in 0..QUEUES {
        total += wire::max_offset(client, addr, TOPIC, q).await?;
    }
    Ok(total)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oneway_flood_on_a_healthy_connection_stores_every_message() {
    for flush in [FlushMode::Async, FlushMode::Sync] {
        let dir = tempfile::tempdir().expect("tempdir");
        let serve = Serve::start(&ServeOptions::new(
            comet_bin(),
            dir.path().to_path_buf(),
            flush,
        ))
        .expect("start comet serve");
        let client = RemotingClient::new(ClientConfig::default());
        // One acknowledged send creates the topic with a known queue count.
        let first = wire::send_request(TOPIC, 0, QUEUES, body_for(0));
        assert!(matches!(
            wire::send(&client, &serve.broker, first, RPC_TIMEOUT).await,
            SendOutcome::Acked(_)
        ));
        let started = Instant::now();
        for id in 1..=FLOOD {
            let queue_id = (id % QUEUES as u64) as i32;
            let request = wire::send_request(TOPIC, queue_id, QUEUES, body_for(id));
            client
                .invoke_oneway(&serve.broker, request)
                .await
                .unwrap_or_else(|e| panic!("oneway send {id} failed: {e}"));
        }
        let written = started.elapsed();
        let expected = i64::try_from(FLOOD + 1).expect("count fits");
        // Counted on a connection of its own: on the flood's connection a query waits behind
        // every oneway request still unread, which on a loaded box takes longer than one RPC
        // timeout. A query that still times out is retried until the settle deadline.
        let audit = RemotingClient::new(ClientConfig::default());
        let settle = Instant::now();
        let stored = loop {
            let stored = stored_count(&audit, &serve.broker).await;
            let settled = matches!(stored, Ok(n) if n >= expected);
            if settled || settle.elapsed() >= SETTLE_TIMEOUT {
                break stored.unwrap_or_else(|e| panic!("counting stored messages: {e}"));
            }
            tokio::time::sleep(SETTLE_POLL).await;
        };
        audit.shutdown().await;
        assert!(
            client.channel(&serve.broker).is_some(),
            "connection stayed up"
        );
        eprintln!(
            "{}: {FLOOD} oneway sends written in {:.2}s, {stored} stored after {:.2}s more",
            flush.config_value(),
            written.as_secs_f64(),
            settle.elapsed().as_secs_f64()
        );
        assert_eq!(stored, expected, "stored count = sent count ({flush:?})");
        client.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_flood_answers_every_send_and_stores_every_acknowledged_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = Serve::start(&ServeOptions::new(
        comet_bin(),
        dir.path().to_path_buf(),
        FlushMode::Async,
    ))
    .expect("start comet serve");
    let client = RemotingClient::new(ClientConfig::default());
    let first = wire::send_request(TOPIC, 0, QUEUES, body_for(0));
    assert!(matches!(
        wire::send(&client, &serve.broker, first, RPC_TIMEOUT).await,
        SendOutcome::Acked(_)
    ));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let started = Instant::now();
    for id in 1..=FLOOD {
        let queue_id = (id % QUEUES as u64) as i32;
        let request = wire::send_request(TOPIC, queue_id, QUEUES, body_for(id));
        let tx = tx.clone();
        client.invoke_async(&serve.broker, request, SETTLE_TIMEOUT, move |outcome| {
            let _ = tx.send(outcome.map(|rsp| rsp.code));
        });
    }
    drop(tx);
    let (mut acked, mut busy, mut other) = (0_i64, 0_u64, Vec::new());
    while let Some(outcome) = rx.recv().await {
        match outcome {
            Ok(code) if code == i32::from(ResponseCode::Success) => acked += 1,
            Ok(code) if code == i32::from(ResponseCode::SystemBusy) => busy += 1,
            Ok(code) => other.push(format!("code {code}")),
            Err(e) => other.push(e.to_string()),
        }
    }
    let answered = started.elapsed();
    assert!(
        other.is_empty(),
        "async sends without a proper answer: {other:?}"
    );
    assert_eq!(
        acked + busy as i64,
        FLOOD as i64,
        "every async send was answered"
    );
    // Acknowledged under ASYNC_FLUSH means appended; wait until dispatch has caught up with the
    // CommitLog before counting ConsumeQueue entries.
    let settle = Instant::now();
    while wire::dispatch_behind_bytes(&client, &serve.broker)
        .await
        .expect("runtime info")
        > 0
    {
        assert!(
            settle.elapsed() < SETTLE_TIMEOUT,
            "dispatch never caught up with the CommitLog"
        );
        tokio::time::sleep(SETTLE_POLL).await;
    }
    let stored = stored_count(&client, &serve.broker)
        .await
        .expect("max offsets");
    eprintln!(
        "ASYNC_FLUSH: {FLOOD} async sends answered in {:.2}s: {acked} acked, {busy} SYSTEM_BUSY; \
         {stored} stored",
        answered.as_secs_f64()
    );
    assert_eq!(
        stored,
        acked + 1,
        "exactly the acknowledged messages are stored"
    );
    if busy > 0 {
        assert!(
            serve.log().to_lowercase().contains("busy"),
            "SYSTEM_BUSY answers must be logged"
        );
    }
    client.shutdown().await;
}
