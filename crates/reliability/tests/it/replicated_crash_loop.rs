//! CI version of the replicated crash loop: a name server, a master and its slave as separate
//! processes; the master, the slave and both are SIGKILLed in turn under load and restarted,
//! and both brokers are audited after every cycle (see `comet_reliability::replicated`).

use std::time::Duration;

use comet_reliability::replicated::{ReplicatedConfig, ReplicationMode, run};
use comet_reliability::serve::FlushMode;
use comet_testkit::process::comet_bin;

/// One kill of each kind: master, slave, both.
const CI_CYCLES: u32 = 3;
const CI_MAX_KILL_DELAY: Duration = Duration::from_millis(800);

fn config(mode: ReplicationMode, dir: &tempfile::TempDir, seed: u64) -> ReplicatedConfig {
    let mut config = ReplicatedConfig::new(comet_bin(), dir.path().to_path_buf(), CI_CYCLES, mode);
    config.flush = FlushMode::Async;
    config.seed = seed;
    config.max_kill_delay = CI_MAX_KILL_DELAY;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_master_loses_no_acknowledged_message_on_either_broker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = run(&config(ReplicationMode::Sync, &dir, 31))
        .await
        .unwrap_or_else(|e| panic!("replicated crash loop failed: {e}"));
    eprintln!("{report}");
    assert_eq!(report.cycles, CI_CYCLES);
    assert_eq!(
        (report.master_kills, report.slave_kills, report.both_kills),
        (1, 1, 1)
    );
    assert_eq!(report.audits, CI_CYCLES);
    assert_eq!(report.lost, 0);
    assert_eq!(
        report.gaps.len(),
        2,
        "the slave is examined at both master kills"
    );
    assert!(
        report.gaps.iter().all(|g| g.acked_missing == 0),
        "SYNC_MASTER: the slave holds every acknowledged message when its master dies"
    );
    assert_eq!(report.log_comparisons, CI_CYCLES, "byte-equal CommitLogs");
    assert!(report.bytes_compared > 0);
    assert!(report.delivered >= report.acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_master_measures_the_slave_gap_and_loses_nothing_on_the_master() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = run(&config(ReplicationMode::Async, &dir, 32))
        .await
        .unwrap_or_else(|e| panic!("replicated crash loop failed: {e}"));
    eprintln!("{report}");
    assert_eq!(report.cycles, CI_CYCLES);
    assert_eq!(report.audits, CI_CYCLES);
    // The gap is measured, not forbidden; the master, restarted, still holds everything.
    assert_eq!(report.gaps.len(), 2);
    assert_eq!(report.lost, 0);
    assert_eq!(report.log_comparisons, CI_CYCLES);
    assert!(report.delivered >= report.acked);
}
