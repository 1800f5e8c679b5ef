//! SIGTERM under load: the broker stops taking requests, answers the ones it already read, and
//! exits cleanly; every acknowledged message is stored; no request is left hanging (each gets an
//! answer or sees its connection close, never a timeout); the restart takes the fast (normal)
//! recovery path.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use comet_reliability::body::{body_for, intact_id};
use comet_reliability::serve::{FlushMode, Serve, ServeOptions};
use comet_reliability::wire::{self, SendOutcome, Stored};
use comet_remoting::{ClientConfig, RemotingClient, RemotingError};
use comet_testkit::process::comet_bin;
use parking_lot::Mutex;

const TOPIC: &str = "ReliabilityShutdownTopic";
const QUEUES: i32 = 4;
const SENDERS: u64 = 8;
/// Acknowledgements before the SIGTERM, so it lands under load.
const ACKS_BEFORE_TERM: usize = 500;
/// Far longer than a graceful shutdown takes: a request that runs into it was left hanging.
const SEND_TIMEOUT: Duration = Duration::from_secs(20);
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
const PROGRESS_TIMEOUT: Duration = Duration::from_secs(60);
const PROGRESS_POLL: Duration = Duration::from_millis(5);

#[derive(Default)]
struct Outcomes {
    acked: HashMap<u64, Stored>,
    refused: u64,
    closed: u64,
    connect_failed: u64,
    hanging: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_loses_no_ack_and_restarts_on_the_fast_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = ServeOptions::new(comet_bin(), dir.path().to_path_buf(), FlushMode::Sync);
    let mut serve = Serve::start(&options).expect("start");
    let client = RemotingClient::new(ClientConfig::default());
    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let done = Arc::new(AtomicBool::new(false));
    let next_id = Arc::new(AtomicU64::new(0));
    let mut senders = Vec::new();
    for _ in 0..SENDERS {
        let client = client.clone();
        let addr = serve.broker.clone();
        let outcomes = Arc::clone(&outcomes);
        let done = Arc::clone(&done);
        let next_id = Arc::clone(&next_id);
        senders.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let queue_id = (id % QUEUES as u64) as i32;
                let request = wire::send_request(TOPIC, queue_id, QUEUES, body_for(id));
                let outcome = wire::send(&client, &addr, request, SEND_TIMEOUT).await;
                let mut o = outcomes.lock();
                match outcome {
                    SendOutcome::Acked(stored) => {
                        o.acked.insert(id, stored);
                    }
                    SendOutcome::Refused { .. } => o.refused += 1,
                    SendOutcome::Unanswered(RemotingError::ConnectionClosed { .. })
                    | SendOutcome::Unanswered(RemotingError::SendFailed { .. }) => o.closed += 1,
                    SendOutcome::Unanswered(RemotingError::ConnectFailed { .. }) => {
                        // The listener is gone: this sender is done.
                        o.connect_failed += 1;
                        return;
                    }
                    SendOutcome::Unanswered(other) => o.hanging.push(other.to_string()),
                }
            }
        }));
    }
    let started = Instant::now();
    while outcomes.lock().acked.len() < ACKS_BEFORE_TERM {
        assert!(
            started.elapsed() < PROGRESS_TIMEOUT,
            "senders made no progress"
        );
        tokio::time::sleep(PROGRESS_POLL).await;
    }
    serve.signal_terminate().expect("SIGTERM");
    let exit = tokio::task::block_in_place(|| serve.wait_exit(EXIT_TIMEOUT)).expect("exit");
    done.store(true, Ordering::Relaxed);
    for s in senders {
        s.await.expect("sender task");
    }
    client.shutdown().await;
    assert!(exit.success(), "comet serve exited with {exit}");
    assert!(
        !options.store_dir().join("abort").exists(),
        "a clean shutdown removes the abort file"
    );
    let outcomes = std::mem::take(&mut *outcomes.lock());
    assert!(
        outcomes.hanging.is_empty(),
        "requests left without an answer or a closed connection: {:?}",
        outcomes.hanging
    );
    drop(serve);

    let serve = Serve::start(&options).expect("restart");
    let restart_log = serve.log();
    assert!(
        restart_log.contains("abnormal=false") || restart_log.contains("abnormal: false"),
        "restart after SIGTERM must take the normal recovery path:\n{restart_log}"
    );
    let client = RemotingClient::new(ClientConfig::default());
    let mut stored = HashMap::new();
    for q in 0..QUEUES {
        for m in wire::pull_all(&client, &serve.broker, "shutdown_audit", TOPIC, q)
            .await
            .expect("pull")
        {
            let id = intact_id(&m.body).expect("intact message");
            stored.insert(
                id,
                Stored {
                    queue_id: m.queue_id,
                    queue_offset: m.queue_offset,
                },
            );
        }
    }
    for (id, at) in &outcomes.acked {
        assert_eq!(
            stored.get(id),
            Some(at),
            "acknowledged message {id} lost or moved"
        );
    }
    eprintln!(
        "sigterm under load: {} acked, {} refused, {} saw the connection close, {} stored",
        outcomes.acked.len(),
        outcomes.refused,
        outcomes.closed,
        stored.len()
    );
    client.shutdown().await;
}
