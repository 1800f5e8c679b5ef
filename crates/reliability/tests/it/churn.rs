//! CI versions of consumer churn: ~12 s of push consumers (child processes of the
//! `comet-reliability` binary) joining and leaving a clustering group while producers send.
//! Nothing acknowledged may go unconsumed, nothing unknown may arrive.
//!
//! - concurrently: half the leaves are SIGKILLs (seeded), so the broker must notice closed
//!   connections and rebalance without an unregister;
//! - orderly: leaves are graceful only. A SIGKILLed orderly member's queue locks stay on the
//!   broker until they expire (60 s, as in RocketMQ), which does not fit a CI test; the long run
//!   (`comet-reliability churn --orderly`) covers kills. First deliveries must follow queue
//!   order and every order key's sequence. Usually ~15 s; when a handover meets cached messages
//!   the giving member delays its unlock by 20 s (RocketMQ's `unlockDelay`), which lengthens the
//!   drain (RELIABILITY.md, "Consumer churn").

use std::path::PathBuf;
use std::time::Duration;

use comet_reliability::churn::{ChurnConfig, ChurnMode, ChurnReport, run};
use comet_testkit::process::comet_bin;

const CI_DURATION: Duration = Duration::from_secs(12);
/// Paced orderly load (see `ChurnConfig::send_pause`): handovers rarely meet cached messages,
/// whose delayed unlock would stall a queue for 20 s (60 s if its member then exits).
const ORDERLY_SEND_PAUSE: Duration = Duration::from_millis(5);

fn consumer_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_comet-reliability"))
}

fn check_common(report: &ChurnReport) {
    eprintln!("{report}");
    assert!(
        report.consumers_started >= 4,
        "membership changed several times"
    );
    assert!(report.consumers_killed + report.consumers_exited >= 2);
    assert_eq!(report.consumer_exit_failures, 0, "graceful exits succeed");
    assert!(report.acked > 0);
    assert_eq!(
        report.audit.lost, 0,
        "every acknowledged message is eventually consumed"
    );
    assert_eq!(
        report.audit.unknown, 0,
        "nothing is delivered that was never produced"
    );
    assert_eq!(report.audit.consumed, report.acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clustering_group_with_killed_consumers_consumes_every_acknowledged_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ChurnConfig::new(
        comet_bin(),
        consumer_bin(),
        dir.path().to_path_buf(),
        CI_DURATION,
        ChurnMode::Concurrently,
    );
    config.seed = 22;
    let report = run(&config)
        .await
        .unwrap_or_else(|e| panic!("churn run failed: {e}"));
    check_common(&report);
    assert!(
        report.consumers_killed >= 1,
        "some consumers were SIGKILLed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_group_under_churn_keeps_queue_and_key_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ChurnConfig::new(
        comet_bin(),
        consumer_bin(),
        dir.path().to_path_buf(),
        CI_DURATION,
        ChurnMode::Orderly,
    );
    config.seed = 21;
    config.kill_percent = 0;
    config.send_pause = ORDERLY_SEND_PAUSE;
    let report = run(&config)
        .await
        .unwrap_or_else(|e| panic!("churn run failed: {e}"));
    check_common(&report);
    assert_eq!(
        (
            report.audit.queue_order_violations,
            report.audit.key_order_violations
        ),
        (0, 0),
        "first deliveries follow queue and key order: {:?}",
        report.audit.first_violation
    );
}
