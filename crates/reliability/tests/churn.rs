//! CI version of consumer churn: ~15 s of push consumers joining and leaving a clustering group
//! while producers send; nothing acknowledged may go unconsumed, nothing unknown may arrive.

mod common;

use std::time::Duration;

use comet_reliability::churn::{ChurnConfig, run};

const CI_DURATION: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clustering_group_under_churn_consumes_every_acknowledged_message() {
    let dir = common::data_dir();
    let mut config = ChurnConfig::new(common::comet_bin(), dir.path().to_path_buf(), CI_DURATION);
    config.seed = 21;
    let report = run(&config)
        .await
        .unwrap_or_else(|e| panic!("churn run failed: {e}"));
    eprintln!("{report}");
    assert!(
        report.consumers_started >= 5,
        "membership changed several times"
    );
    assert!(report.consumers_stopped >= 2);
    assert!(report.acked > 0);
    assert_eq!(
        report.lost, 0,
        "every acknowledged message is eventually consumed"
    );
    assert_eq!(
        report.unknown, 0,
        "nothing is delivered that was never produced"
    );
    assert_eq!(report.consumed, report.acked);
}
