//! CI version of the timer crash test: 1,000 timer messages due over 15 s, the broker SIGKILLed
//! once while they wait; every one must arrive, none before its time (see
//! `comet_reliability::timer_crash`).

use std::time::Duration;

use comet_reliability::timer_crash::{TimerCrashConfig, run};
use comet_testkit::process::comet_bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_messages_survive_a_kill_and_none_arrives_early() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = TimerCrashConfig::new(comet_bin(), dir.path().to_path_buf());
    config.messages = 1000;
    config.span = Duration::from_secs(15);
    config.lead = Duration::from_secs(3);
    config.kills = 1;
    config.seed = 21;
    let report = run(&config)
        .await
        .unwrap_or_else(|e| panic!("timer crash test failed: {e}"));
    eprintln!("{report}");
    assert_eq!(report.acked, 1000, "every send acknowledged");
    assert_eq!(
        report.lost, 0,
        "an acknowledged timer message was never delivered"
    );
    assert_eq!(
        report.early, 0,
        "a timer message was delivered before its time"
    );
    assert_eq!(report.unknown, 0);
}
