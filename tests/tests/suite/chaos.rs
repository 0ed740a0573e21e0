//! The short chaos run of `make test` (the long one is `make chaos`): 20 runs against stand-ins
//! of random latency, while for 40 s a random manager, executor, auditor, nats-server or
//! redis-server is killed with SIGKILL (and restarted on its data) or frozen with SIGSTOP, or
//! a manager's, an executor's or an auditor's link to nats-server or the managers' to
//! redis-server is cut at a fault proxy,
//! or the executors' work-dir tmpfs is filled, for a while.
//! With correct stand-ins every run must complete, with no duplicate episode and no lost
//! evidence.

use loopgate_tests::chaos::{self, Action, ChaosConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_chaos_run_loses_nothing_and_wedges_nothing() -> anyhow::Result<()> {
    let config = ChaosConfig::short();
    let report = chaos::run(&config, &|line| eprintln!("chaos: {line}")).await?;
    let text = report.markdown();
    eprintln!("{text}");
    assert!(!report.faults.is_empty(), "the run must inject faults");
    for kind in [Action::Kill, Action::Partition, Action::DiskFull] {
        let drawn = report.kinds.contains(&kind);
        let hit = report.faults.iter().any(|f| f.action == kind);
        assert!(
            !drawn || hit,
            "no {} fault in the short run\n{text}",
            kind.name()
        );
    }
    assert_eq!(report.terminal, report.runs, "{text}");
    assert_eq!(report.completed, report.runs, "{text}");
    assert!(report.duplicate_episodes.is_empty(), "{text}");
    assert!(report.duplicate_log_steps.is_empty(), "{text}");
    assert!(report.lost_evidence.is_empty(), "{text}");
    Ok(())
}
