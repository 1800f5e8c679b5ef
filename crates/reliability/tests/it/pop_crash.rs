//! CI version of the POP crash test: 200 messages popped, half acked, the broker SIGKILLed with
//! the other half in flight; every message must come back and be acked after the restart (see
//! `comet_reliability::pop_crash`).

use comet_reliability::pop_crash::{PopCrashConfig, run};
use comet_testkit::process::comet_bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacked_pop_messages_survive_a_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = PopCrashConfig::new(comet_bin(), dir.path().to_path_buf());
    let report = run(&config)
        .await
        .unwrap_or_else(|e| panic!("pop crash test failed: {e}"));
    eprintln!("{report}");
    assert_eq!(report.sent, 200, "every send acknowledged");
    assert!(
        report.in_flight_at_kill > 0,
        "messages were in flight at the kill"
    );
    assert_eq!(report.lost, 0, "an un-acked POP message never came back");
    assert_eq!(report.unknown, 0);
}
