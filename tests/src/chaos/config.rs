//! What a chaos run does: how many runs and workers, how long and how often faults come.

use std::time::Duration;

use crate::Latency;

/// What to run.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Runs in flight: submitted at the start and, with `keep_in_flight`, topped up after
    /// every fault as runs end, so the faults of the whole window hit work in progress.
    pub runs: usize,
    pub keep_in_flight: bool,
    pub managers: usize,
    pub executors: usize,
    pub auditors: usize,
    /// How long faults are injected.
    pub duration: Duration,
    /// Mean time between two faults (each is drawn from half to one and a half of it).
    pub fault_every: Duration,
    /// How long a SIGSTOPped component stays frozen (drawn from `1..=max`).
    pub max_freeze: Duration,
    /// After the faults stop: how long the runs get to end.
    pub drain: Duration,
    /// Stand-in model latency per reply (an executor step is two replies and more).
    pub latency: Latency,
    /// Each run's acceptance check first sleeps this many seconds (`lo..=hi`, spread over the
    /// runs), so auditors are killed mid-audit; `(0, 0)`: checks as fast as they run.
    pub check_secs: (u64, u64),
    /// The executors' and auditors' `ack_wait_secs` (a frozen or killed worker's step is
    /// redelivered after this).
    pub worker_ack_wait_secs: u64,
    /// When an executor or an auditor is drawn, hit one that holds a step (read from the runs'
    /// logs) when any does: with many workers and short episodes a uniform draw mostly hits
    /// idle ones, which proves nothing about taking over a killed worker's step.
    pub prefer_busy_workers: bool,
    /// Network partitions among the faults: every manager, executor and auditor reaches
    /// nats-server and the managers reach redis-server through a fault proxy, and a drawn
    /// link is cut for `1..=max_freeze`, then healed.
    pub partitions: bool,
    /// Full disks among the faults: the executors' work dirs on a tmpfs of `disk_size`, filled
    /// for `1..=max_freeze`, then freed (needs root to mount; without it the fault is left out
    /// and the run says so).
    pub disk_full: bool,
    /// The work-dir tmpfs's size (mount(8)'s `size=`).
    pub disk_size: String,
    /// The managers' Redis is a primary, a replica and three sentinels (`RedisHa`) instead of
    /// one redis-server on its AOF: a Redis fault hits the primary (killed: the sentinels
    /// promote the replica and the old primary comes back as its replica; frozen: promoted
    /// past, then demoted as it wakes), and every open run's log is read before and after to
    /// count the entries a failover lost. The managers' Redis link is then not among the
    /// partitions (they reach the nodes the sentinels name, not a proxy): a manager's NATS
    /// link is cut in its place.
    pub redis_ha: bool,
    /// Draw the kinds of fault (each component kind, a partition, a full disk) from a shuffled
    /// bag of one of each instead of uniformly, so a run of `n` faults hits every kind about
    /// `n / kinds` times (a uniform draw of 120 faults over 7 kinds left one kind at 10).
    pub balanced_draws: bool,
    /// Where to copy every daemon's whole log at the end (`chaos-bench --logs DIR`), to read
    /// what a stuck or duplicated step did.
    pub logs: Option<std::path::PathBuf>,
    pub seed: u64,
}

impl ChaosConfig {
    /// The long run of `make chaos`.
    pub fn full() -> ChaosConfig {
        ChaosConfig {
            runs: 100,
            keep_in_flight: true,
            managers: 2,
            executors: 8,
            auditors: 3,
            duration: Duration::from_secs(300),
            fault_every: Duration::from_secs(4),
            max_freeze: Duration::from_secs(8),
            drain: Duration::from_secs(600),
            latency: Latency {
                min: Duration::from_millis(100),
                max: Duration::from_millis(2000),
            },
            check_secs: (0, 0),
            worker_ack_wait_secs: 5,
            prefer_busy_workers: true,
            partitions: true,
            disk_full: true,
            disk_size: "256m".into(),
            redis_ha: false,
            balanced_draws: false,
            logs: None,
            seed: 0xc4a0_5eed,
        }
    }

    /// Faults that look like production (`chaos-bench --production`): executor steps of about
    /// 5-60 s (replies of 2.5-30 s) and checks of 1-10 s, so kills land mid-episode and
    /// mid-audit; freezes longer than `ack_wait`; Redis with Sentinel, its primary failed
    /// over; 30 minutes, a fault every 5-15 s (about 120, and with balanced draws each of the
    /// seven kinds comes about 17 times).
    pub fn production() -> ChaosConfig {
        ChaosConfig {
            redis_ha: true,
            balanced_draws: true,
            runs: 40,
            duration: Duration::from_secs(1800),
            fault_every: Duration::from_secs(10),
            max_freeze: Duration::from_secs(20),
            drain: Duration::from_secs(1800),
            latency: Latency {
                min: Duration::from_millis(2500),
                max: Duration::from_secs(30),
            },
            check_secs: (1, 10),
            ..ChaosConfig::full()
        }
    }

    /// The short version in `make test`. Its seed draws, in 40 s, every component kind, a
    /// cut of a manager's NATS link and of an executor's NATS link, and a full disk.
    pub fn short() -> ChaosConfig {
        ChaosConfig {
            runs: 20,
            executors: 4,
            auditors: 2,
            duration: Duration::from_secs(40),
            fault_every: Duration::from_secs(4),
            max_freeze: Duration::from_secs(6),
            drain: Duration::from_secs(300),
            latency: Latency {
                min: Duration::from_millis(100),
                max: Duration::from_millis(1000),
            },
            seed: 0x9c8,
            ..ChaosConfig::full()
        }
    }
}
