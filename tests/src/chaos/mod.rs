//! The chaos run: a whole stack (nats-server on its file store, redis-server with its AOF or,
//! with `redis_ha`, a primary, a replica and three sentinels, several managers, executors and
//! auditors) with many runs in flight, while every few seconds
//! a random component is killed with SIGKILL (and restarted on its own data) or frozen with
//! SIGSTOP for a while, or (with `partitions` and `disk_full`) a link to nats-server (a
//! manager's, an executor's or an auditor's) or the managers' to redis-server is cut at a
//! fault proxy, or the executors' work-dir tmpfs is filled, for a
//! while. Afterwards every run is read back (see `report`).
//!
//! Used by `chaos-bench` (`make chaos`, the long version) and by the short end-to-end test.

mod config;
mod exposure;
mod failover;
mod fault;
mod goals;
mod links_disks;
mod markdown;
mod recovery;
mod report;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use loopgate_test_support::{StandInModel, Tmpfs};

use crate::{
    check_secs_for, tagged_task_checking_for, EpisodeLedger, Profile, Stack, StackOptions, Worker,
    TERMINAL,
};

pub use config::ChaosConfig;
pub use exposure::Exposure;
pub use fault::{Action, Component, Fault, LogCheck};
pub use goals::Goal;
pub use report::{ChaosReport, KindRecovery};

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// The next of `slots` kinds of draw: uniform, or with `balanced` from a shuffled bag of
    /// every kind once (refilled when empty), so over `k * slots` draws each kind comes `k`
    /// times.
    fn draw(&mut self, slots: usize, balanced: bool, bag: &mut Vec<usize>) -> usize {
        if !balanced {
            return self.below(slots);
        }
        if bag.is_empty() || bag.iter().any(|s| *s >= slots) {
            *bag = (0..slots).collect();
            for i in (1..bag.len()).rev() {
                let j = self.below(i + 1);
                bag.swap(i, j);
            }
        }
        bag.pop().unwrap_or(0)
    }
    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_millis() as u64;
        lo + Duration::from_millis(self.next() % (span + 1))
    }
}

/// The 1-minute load average (`/proc/loadavg`), if readable.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Runs the chaos described by `config` and reads every run back. `progress` gets one line
/// per fault and per phase.
pub async fn run(config: &ChaosConfig, progress: &dyn Fn(&str)) -> anyhow::Result<ChaosReport> {
    let ledger = EpisodeLedger::new(config.seed);
    let model = StandInModel::start(ledger.script(config.latency)).await?;
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        config.executors,
    );
    opts.managers = config.managers.max(2);
    opts.auditors = config.auditors;
    opts.persistent_redis = true;
    opts.manager_extra = "sweep_interval_ms = 200".into();
    opts.executor_extra = format!("ack_wait_secs = {}", config.worker_ack_wait_secs);
    opts.auditor_extra = format!("ack_wait_secs = {}", config.worker_ack_wait_secs);
    // The audit durable is the manager's: its ack_wait is the auditors' too.
    opts.manager_tables = format!(
        "[jetstream]\naudit_ack_wait_secs = {}",
        config.worker_ack_wait_secs
    );
    opts.executor_nats_proxy = config.partitions;
    // With Sentinel the managers reach the nodes the sentinels name, not a proxy.
    opts.redis_proxy = config.partitions && !config.redis_ha;
    opts.redis_ha = config.redis_ha;
    opts.manager_nats_proxy = config.partitions;
    opts.auditor_nats_proxy = config.partitions;
    // Declared before the stack, so it is unmounted after the executors stopped.
    let disk = if config.disk_full {
        let disk = Tmpfs::mount(&config.disk_size, "chaos: full work dirs")?;
        if disk.is_none() {
            progress("no tmpfs (mounting needs root): full disks are left out");
        }
        disk
    } else {
        None
    };
    opts.executor_work_root = disk.as_ref().map(|d| d.path().to_path_buf());
    let mut stack = Stack::start(opts).await?;
    let load_start = load_average();
    let started_ms = now_ms();
    let mut ids = Vec::with_capacity(config.runs);
    let mut open = Vec::with_capacity(config.runs);
    top_up(&stack, &mut ids, &mut open, config).await?;
    progress(&format!("submitted {} runs", ids.len()));

    let mut rng = Rng(config.seed | 1);
    let mut bag = Vec::new();
    let mut faults_stopped = None;
    let mut faults = Vec::new();
    let mut load_max = load_start.unwrap_or(0.0);
    let chaos_end = Instant::now() + config.duration;
    while Instant::now() < chaos_end {
        let pause = rng.between(config.fault_every / 2, config.fault_every * 3 / 2);
        tokio::time::sleep(pause).await;
        if Instant::now() >= chaos_end {
            break;
        }
        // A fault that cannot be injected or brought back ends the faults, not the run: the
        // runs still drain and are read back, and the report says why the faults stopped.
        let fault = match inject(&mut stack, disk.as_ref(), &mut rng, &mut bag, config).await {
            Ok(fault) => fault,
            Err(e) => {
                let why = format!("{e:#}");
                progress(&format!("faults stopped: {why}"));
                faults_stopped = Some(why);
                break;
            }
        };
        progress(&format!(
            "{:>5.1} s: {} {} (back after {} ms)",
            (fault.at_ms - started_ms) as f64 / 1000.0,
            fault.action.name(),
            fault.target,
            fault.back_ms - fault.at_ms
        ));
        faults.push(fault);
        load_max = load_max.max(load_average().unwrap_or(0.0));
        if config.keep_in_flight {
            top_up(&stack, &mut ids, &mut open, config).await?;
        }
    }
    progress(&format!("{} runs submitted in all", ids.len()));
    let chaos_end_ms = now_ms();
    progress(&format!(
        "{} faults injected; waiting up to {:?} for the runs to end",
        faults.len(),
        config.drain
    ));
    let drain_end = Instant::now() + config.drain;
    loop {
        let mut open = 0;
        for id in &ids {
            match stack.run(id).await {
                Ok(v) if TERMINAL.contains(&v["state"].as_str().unwrap_or("")) => {}
                _ => open += 1,
            }
        }
        load_max = load_max.max(load_average().unwrap_or(0.0));
        if open == 0 || Instant::now() >= drain_end {
            progress(&format!("{open} runs still open"));
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut findings = Vec::with_capacity(ids.len());
    for id in &ids {
        findings.push(stack.inspect_run(id).await?);
    }
    let kinds = Action::ALL
        .into_iter()
        .filter(|k| match k {
            Action::Partition => config.partitions,
            Action::DiskFull => disk.is_some(),
            Action::Kill | Action::Freeze => true,
        })
        .collect();
    if let Some(dir) = &config.logs {
        if let Err(e) = report::write_timelines(dir, &findings, &faults) {
            progress(&format!(
                "writing the run timelines to {}: {e:#}",
                dir.display()
            ));
        }
    }
    let report = ChaosReport::build(report::Inputs {
        config: config.clone(),
        kinds,
        findings,
        episodes: ledger.by_round(),
        faults,
        started_ms,
        chaos_end_ms,
        ended_ms: now_ms(),
        load_start,
        load_max,
        faults_stopped,
    });
    if let Some(dir) = &config.logs {
        match stack.copy_logs(dir) {
            Ok(n) => progress(&format!("copied {n} daemon logs to {}", dir.display())),
            Err(e) => progress(&format!(
                "copying the daemon logs to {}: {e:#}",
                dir.display()
            )),
        }
    }
    stack.stop_gracefully(Duration::from_secs(5)).await;
    Ok(report)
}

/// Hits one random component (or link, or the work-dir disk) and brings it back. With
/// `partitions` and a disk, each of those is drawn as often as one component kind (with
/// `balanced_draws`, exactly as often, from `bag`).
async fn inject(
    stack: &mut Stack,
    disk: Option<&Tmpfs>,
    rng: &mut Rng,
    bag: &mut Vec<usize>,
    config: &ChaosConfig,
) -> anyhow::Result<Fault> {
    let kinds = Component::ALL.len();
    let partition_slot = config.partitions.then_some(kinds);
    let disk_slot = disk.map(|_| kinds + usize::from(config.partitions));
    let slots = kinds + usize::from(partition_slot.is_some()) + usize::from(disk_slot.is_some());
    let slot = rng.draw(slots, config.balanced_draws, bag);
    let at_ms = now_ms();
    let (component, action, target, log_check) = match (disk, slot) {
        (_, s) if Some(s) == partition_slot => {
            let (component, target) = links_disks::partition(stack, rng, config).await?;
            (component, Action::Partition, target, None)
        }
        (Some(disk), s) if Some(s) == disk_slot => {
            links_disks::fill_disk(disk, rng, config).await?;
            (
                Component::Executor,
                Action::DiskFull,
                "exec-*".to_string(),
                None,
            )
        }
        (_, s) => {
            let component = Component::ALL[s % kinds];
            let (action, target, log_check) = process_fault(stack, component, rng, config).await?;
            (component, action, target, log_check)
        }
    };
    Ok(Fault {
        component,
        action,
        target,
        at_ms,
        back_ms: now_ms(),
        log_check,
    })
}

/// How long a draw with `prefer_busy_workers` waits for a worker of the drawn kind to hold a
/// step when none does (audits are short beside executor steps: without the wait most auditor
/// faults hit idle auditors).
const BUSY_WAIT: Duration = Duration::from_secs(15);
const BUSY_POLL: Duration = Duration::from_millis(500);

/// A drawn executor or auditor: with `prefer_busy_workers`, one that holds a step, waiting up
/// to [`BUSY_WAIT`] for one to (then any).
async fn pick_worker(
    stack: &Stack,
    component: Component,
    rng: &mut Rng,
    config: &ChaosConfig,
) -> Worker {
    let (count, of): (usize, fn(usize) -> Worker) = if component == Component::Executor {
        (stack.executors.len(), Worker::Executor)
    } else {
        (stack.auditor_count(), Worker::Auditor)
    };
    let mut busy: Vec<Worker> = Vec::new();
    let until = tokio::time::Instant::now() + BUSY_WAIT;
    if config.prefer_busy_workers {
        loop {
            let holding = busy_workers(stack).await;
            busy = (0..count)
                .map(of)
                .filter(|w| holding.contains(&stack.worker_id(*w)))
                .collect();
            if !busy.is_empty() || tokio::time::Instant::now() >= until {
                break;
            }
            tokio::time::sleep(BUSY_POLL).await;
        }
    }
    if busy.is_empty() {
        of(rng.below(count))
    } else {
        busy[rng.below(busy.len())]
    }
}

/// SIGKILL (and restart) or SIGSTOP (and SIGCONT) one process of `component` (with Redis
/// Sentinel, the Redis primary; then with the open runs' logs compared across it).
async fn process_fault(
    stack: &mut Stack,
    component: Component,
    rng: &mut Rng,
    config: &ChaosConfig,
) -> anyhow::Result<(Action, String, Option<LogCheck>)> {
    let action = if rng.below(3) == 0 {
        Action::Freeze
    } else {
        Action::Kill
    };
    let freeze = rng.between(Duration::from_secs(1), config.max_freeze);
    let target = match component {
        Component::Manager => {
            let i = rng.below(stack.managers.len());
            let name = stack.managers[i].child.name().to_string();
            match action {
                Action::Freeze => {
                    stack.managers[i].child.signal("STOP");
                    tokio::time::sleep(freeze).await;
                    stack.managers[i].child.signal("CONT");
                }
                _ => {
                    stack.kill_manager(i);
                    stack.spawn_manager().await?;
                }
            }
            name
        }
        Component::Executor | Component::Auditor => {
            let worker = pick_worker(stack, component, rng, config).await;
            match action {
                Action::Freeze => {
                    stack.worker_mut(worker).signal("STOP");
                    tokio::time::sleep(freeze).await;
                    stack.worker_mut(worker).signal("CONT");
                }
                _ => stack.restart_worker(worker)?,
            }
            stack.worker_id(worker)
        }
        Component::Nats => {
            match action {
                Action::Freeze => {
                    stack.nats.process_mut().signal("STOP");
                    tokio::time::sleep(freeze).await;
                    stack.nats.process_mut().signal("CONT");
                }
                _ => {
                    stack.nats.kill();
                    stack.nats.restart().await?;
                }
            }
            "nats-server".to_string()
        }
        Component::Redis if stack.redis_ha.is_some() => {
            let (target, check) = failover::hit_primary(stack, action, freeze).await?;
            return Ok((action, target, Some(check)));
        }
        Component::Redis => {
            match action {
                Action::Freeze => {
                    stack.redis.process_mut().signal("STOP");
                    tokio::time::sleep(freeze).await;
                    stack.redis.process_mut().signal("CONT");
                }
                _ => {
                    stack.redis.kill();
                    stack.redis.restart().await?;
                }
            }
            "redis-server".to_string()
        }
    };
    Ok((action, target, None))
}

/// The worker ids that hold a step right now: for every running run in `executing` or
/// `auditing`, the worker of its latest `episode_started`. Best effort: an API error gives
/// none (the draw is then uniform).
async fn busy_workers(stack: &Stack) -> Vec<String> {
    let Ok(list) = stack.get("/v1/runs?state=running&limit=500").await else {
        return Vec::new();
    };
    let mut busy = Vec::new();
    for run in list["runs"].as_array().into_iter().flatten() {
        let phase = run["phase"].as_str().unwrap_or_default();
        if !matches!(phase, "executing" | "auditing") {
            continue;
        }
        let id = run["id"].as_str().unwrap_or_default();
        if let Ok(started) = stack.log_entries(id, "episode_started").await {
            if let Some(worker) = started.last().and_then(|e| e["worker"].as_str()) {
                busy.push(worker.to_string());
            }
        }
    }
    busy
}

/// Keep `in_flight` runs open: drop the ones that ended from `open` and submit new ones (each
/// with the next tag) until `in_flight` are open again. A run whose state cannot be read (its
/// manager is down) counts as open.
async fn top_up(
    stack: &Stack,
    ids: &mut Vec<String>,
    open: &mut Vec<String>,
    config: &ChaosConfig,
) -> anyhow::Result<()> {
    let in_flight = config.runs;
    let mut still_open = Vec::with_capacity(open.len());
    for id in open.drain(..) {
        match stack.run(&id).await {
            Ok(v) if TERMINAL.contains(&v["state"].as_str().unwrap_or("")) => {}
            _ => still_open.push(id),
        }
    }
    *open = still_open;
    while open.len() < in_flight {
        let tag = ids.len();
        let task = tagged_task_checking_for(tag, check_secs_for(tag, config.check_secs));
        let run = match stack.submit(&task, &[]).await {
            Ok(run) => run,
            // The API is down for a moment (a manager killed, Redis frozen): next time.
            Err(_) if !ids.is_empty() => break,
            Err(e) => return Err(e),
        };
        let id = run["id"].as_str().unwrap_or_default().to_string();
        ids.push(id.clone());
        open.push(id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn balanced_draws_give_every_kind_once_per_round_of_the_bag() {
        // (balanced, draws, slots, each kind exactly this often)
        let cases = [
            (true, 70, 7, Some(10)),
            (true, 12, 6, Some(2)),
            (false, 70, 7, None),
        ];
        for (balanced, draws, slots, want) in cases {
            let mut rng = Rng(0xc4a0_5eed | 1);
            let mut uniform = Rng(0xc4a0_5eed | 1);
            let mut bag = Vec::new();
            let mut counts = vec![0; slots];
            for _ in 0..draws {
                let slot = rng.draw(slots, balanced, &mut bag);
                if !balanced {
                    // Uniform draws are the plain draw, so a seed's faults stay the same.
                    assert_eq!(slot, uniform.below(slots));
                }
                counts[slot] += 1;
            }
            if let Some(each) = want {
                assert!(counts.iter().all(|c| *c == each), "{counts:?}");
            }
        }
    }
}
