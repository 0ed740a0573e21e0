//! What a chaos run did to the runs: terminal and completed runs, duplicate episodes (two
//! episodes of one round that both finished or that called the model at the same time; a
//! round redone after its worker was killed or frozen is counted apart), evidence lost, the
//! longest stall, and how long each kind of component took to recover.

use std::collections::BTreeMap;

use super::config::ChaosConfig;
use super::exposure::{self, Exposure};
use super::fault::{Action, Component, Fault, LogCheck};
use super::recovery::{self, Recovered};
use crate::{Episode, RunFindings};

pub(crate) struct Inputs {
    pub config: ChaosConfig,
    pub kinds: Vec<Action>,
    pub findings: Vec<RunFindings>,
    pub episodes: BTreeMap<(usize, u32), Vec<Episode>>,
    pub faults: Vec<Fault>,
    pub started_ms: i64,
    pub chaos_end_ms: i64,
    pub ended_ms: i64,
    pub load_start: Option<f64>,
    pub load_max: f64,
    /// Why faults stopped before the end of the window (one that could not be injected or
    /// brought back), if they did.
    pub faults_stopped: Option<String>,
}

/// Recovery figures of one component kind.
#[derive(Debug, Clone, Default)]
pub struct KindRecovery {
    pub kills: usize,
    pub freezes: usize,
    /// Its link cut (a manager's, an executor's or an auditor's to nats-server, the
    /// managers' to redis-server).
    pub partitions: usize,
    /// The executors' work dirs full.
    pub disk_full: usize,
    /// Time until the component was back (restarted and ready, SIGCONTed, the link healed,
    /// the disk freed), ms.
    pub back_ms: Vec<i64>,
    /// Time from the fault until the work it hit had its results again, ms (see
    /// `recovery::recovery_of`): for a fault on one worker, a step it held redone by another
    /// includes that whole episode.
    pub recovery_ms: Vec<i64>,
    /// Time from the fault until the work it hit moved again, ms: for a fault on one worker,
    /// until each step it held had its result or a new episode on another worker (the
    /// take-over); for any other fault the same as `recovery_ms`.
    pub moved_ms: Vec<i64>,
    /// `moved_ms` of its kills alone (the take-over the goal names).
    pub kill_moved_ms: Vec<i64>,
}

impl KindRecovery {
    fn count(&mut self, fault: &Fault, recovered: Recovered) {
        match fault.action {
            Action::Kill => self.kills += 1,
            Action::Freeze => self.freezes += 1,
            Action::Partition => self.partitions += 1,
            Action::DiskFull => self.disk_full += 1,
        }
        self.back_ms.push(fault.back_ms - fault.at_ms);
        if let Some(ms) = recovered.moved_ms {
            self.moved_ms.push(ms);
            if fault.action == Action::Kill {
                self.kill_moved_ms.push(ms);
            }
        }
        if let Some(ms) = recovered.result_ms {
            self.recovery_ms.push(ms);
        }
    }

    /// Faults of any kind.
    pub fn faults(&self) -> usize {
        self.kills + self.freezes + self.partitions + self.disk_full
    }
}

/// The figures of one chaos run.
#[derive(Debug, Clone)]
pub struct ChaosReport {
    pub config: ChaosConfig,
    /// The fault kinds drawn from (full disks only where a tmpfs could be mounted).
    pub kinds: Vec<Action>,
    pub runs: usize,
    pub terminal: usize,
    pub completed: usize,
    /// Run ids and states of runs that did not complete.
    pub not_completed: Vec<(String, String)>,
    /// Steps the run log records twice (`exec_result` of one round twice...).
    pub duplicate_log_steps: Vec<String>,
    /// Rounds where two episodes both finished (and no worker fault came between them) or
    /// called the model at the same time.
    pub duplicate_episodes: Vec<String>,
    /// Rounds redone after a fault hit the episode's worker (killed or frozen).
    pub redone_rounds: usize,
    /// Episodes of a step the run dispatched again in a new round (the round before failed,
    /// e.g. its audit was lost): each had its own round, so none is a duplicate.
    pub redispatched: usize,
    pub episodes: usize,
    pub lost_evidence: Vec<String>,
    /// The longest time, while runs were open, in which no run logged anything (ms).
    pub longest_stall_ms: i64,
    /// The longest time one run went without a log entry (ms).
    pub longest_run_gap_ms: i64,
    pub recovery: BTreeMap<Component, KindRecovery>,
    /// The same figures per fault kind (kill, freeze, partition, disk full); only the
    /// kind's own count is set.
    pub recovery_by_action: BTreeMap<Action, KindRecovery>,
    /// The runs open during each kind of fault, and what became of them.
    pub exposure_by_action: BTreeMap<Action, Exposure>,
    /// The faults of each kind that landed while a run was open.
    pub faults_with_work: BTreeMap<Action, usize>,
    pub faults: Vec<Fault>,
    pub chaos_secs: f64,
    pub total_secs: f64,
    pub load_start: Option<f64>,
    pub load_max: f64,
    /// Why faults stopped before the end of the window (one that could not be injected or
    /// brought back), if they did.
    pub faults_stopped: Option<String>,
}

/// What the episodes of one (run, attempt) were.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RoundEpisodes {
    /// One episode (or none).
    Once,
    /// Two ran at once, or more finished than the run dispatched rounds for the step.
    Duplicate(String),
    /// More than one finished, each in a round of its own: this many extra episodes.
    Redispatched(usize),
    /// Redone after a fault hit the worker of an episode that did not finish.
    Redone,
}

/// Classify the episodes of one attempt of a run, which the run dispatched in `dispatched`
/// rounds: a round that failed for the infrastructure (its audit lost, a deadline) is asked
/// again with the same step, and both its episodes may finish without being duplicates.
fn classify_round(list: &[Episode], dispatched: usize, faults: &[Fault]) -> RoundEpisodes {
    let finished = list.iter().filter(|e| e.finished_ms.is_some()).count();
    for (i, a) in list.iter().enumerate() {
        for b in &list[i + 1..] {
            if a.overlaps(b) {
                return RoundEpisodes::Duplicate(format!(
                    "nonces {} and {} ran at once",
                    a.nonce, b.nonce
                ));
            }
            if let (Some(done), Some(_)) = (a.finished_ms, b.finished_ms) {
                if finished > dispatched && !executor_fault_between(faults, done, b.started_ms) {
                    return RoundEpisodes::Duplicate(format!(
                        "nonces {} and {} both finished ({finished} finished, {dispatched} dispatched)",
                        a.nonce, b.nonce
                    ));
                }
            }
        }
    }
    match list.len() {
        0 | 1 => RoundEpisodes::Once,
        _ if finished > 1 && dispatched > 1 => {
            RoundEpisodes::Redispatched(finished.min(dispatched) - 1)
        }
        _ => RoundEpisodes::Redone,
    }
}

/// Each episode's first model call and its finish (or latest call), in seconds from the
/// start, to set beside the fault lines: `nonce 3 at 10.2-14.0 s, nonce 5 at 20.1-21.3 s`.
fn episode_times(list: &[Episode], origin_ms: i64) -> String {
    let secs = |ms: i64| (ms - origin_ms) as f64 / 1000.0;
    list.iter()
        .map(|e| {
            format!(
                "nonce {} at {:.1}-{:.1} s{}",
                e.nonce,
                secs(e.started_ms),
                secs(e.finished_ms.unwrap_or(e.last_call_ms)),
                if e.finished_ms.is_some() {
                    ""
                } else {
                    " unfinished"
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Did a fault hit an executor between `from` and `to` (Unix ms)? Its link cut or its disk
/// full counts too: the step it held may fail after the episode finished and be redone. So
/// does a freeze of nats-server, which cuts every worker off: a holder that cannot heartbeat
/// for `ack_wait` stops its episode (a self-check or a freeze after its last model call
/// included) and the step is redone once the server is back.
fn executor_fault_between(faults: &[Fault], from: i64, to: i64) -> bool {
    faults.iter().any(|f| {
        let hits_executors = f.component == Component::Executor
            || (f.component == Component::Nats && f.action == Action::Freeze);
        hits_executors && f.at_ms <= to && f.back_ms >= from
    })
}

impl ChaosReport {
    pub(crate) fn build(inputs: Inputs) -> ChaosReport {
        let Inputs {
            config,
            kinds,
            findings,
            episodes,
            faults,
            started_ms,
            chaos_end_ms,
            ended_ms,
            load_start,
            load_max,
            faults_stopped,
        } = inputs;
        let terminal = findings.iter().filter(|f| f.is_terminal()).count();
        let completed = findings.iter().filter(|f| f.state == "completed").count();
        let not_completed = findings
            .iter()
            .filter(|f| f.state != "completed")
            .map(|f| (f.id.clone(), f.state.clone()))
            .collect();
        let duplicate_log_steps = findings
            .iter()
            .flat_map(|f| {
                f.duplicate_steps
                    .iter()
                    .map(move |d| format!("{}: {d}", f.id))
            })
            .collect();
        let lost_evidence = findings
            .iter()
            .flat_map(|f| {
                f.lost_evidence
                    .iter()
                    .map(move |s| format!("{}: {s}", f.id))
            })
            .collect();

        let mut duplicate_episodes = Vec::new();
        let mut duplicates_per_run: BTreeMap<usize, usize> = BTreeMap::new();
        let mut redone_rounds = 0;
        let mut redispatched = 0;
        for ((tag, round), list) in &episodes {
            // How many executor rounds the run dispatched with this attempt's step: a round
            // that failed for the infrastructure (its audit lost, a deadline) is asked again
            // with the same step, and both its episodes may finish without being duplicates.
            let dispatched = findings.get(*tag).map_or(1, |f| {
                f.exec_objectives
                    .iter()
                    .filter(|o| crate::attempt_of(o) == *round)
                    .count()
            });
            match classify_round(list, dispatched, &faults) {
                RoundEpisodes::Duplicate(why) => {
                    *duplicates_per_run.entry(*tag).or_default() += 1;
                    duplicate_episodes.push(format!(
                        "tag {tag} round {round}: {why} ({})",
                        episode_times(list, started_ms)
                    ))
                }
                RoundEpisodes::Redispatched(n) => redispatched += n,
                RoundEpisodes::Redone => redone_rounds += 1,
                RoundEpisodes::Once => {}
            }
        }

        // Stalls: gaps between consecutive log entries of all runs, up to the last entry.
        let mut times: Vec<i64> = findings
            .iter()
            .flat_map(|f| f.entry_times.iter().copied())
            .filter(|t| *t >= started_ms)
            .collect();
        times.sort_unstable();
        let longest_stall_ms = times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let longest_run_gap_ms = findings
            .iter()
            .map(RunFindings::longest_gap_ms)
            .max()
            .unwrap_or(0);

        let mut recovery: BTreeMap<Component, KindRecovery> = BTreeMap::new();
        let mut recovery_by_action: BTreeMap<Action, KindRecovery> = BTreeMap::new();
        for fault in &faults {
            let recovered = recovery::recovery_of(fault, &findings);
            for r in [
                recovery.entry(fault.component).or_default(),
                recovery_by_action.entry(fault.action).or_default(),
            ] {
                r.count(fault, recovered);
            }
        }
        let exposure_by_action = exposure::by_action(&findings, &faults, &duplicates_per_run);
        let faults_with_work = exposure::faults_with_work(&findings, &faults);
        ChaosReport {
            exposure_by_action,
            faults_with_work,
            runs: findings.len(),
            terminal,
            completed,
            not_completed,
            duplicate_log_steps,
            duplicate_episodes,
            redone_rounds,
            redispatched,
            episodes: episodes.values().map(Vec::len).sum(),
            lost_evidence,
            longest_stall_ms,
            longest_run_gap_ms,
            recovery,
            recovery_by_action,
            faults,
            chaos_secs: (chaos_end_ms - started_ms) as f64 / 1000.0,
            // The last run's last log entry (the bench's own clock runs on through the drain).
            total_secs: (findings
                .iter()
                .filter_map(|f| f.entry_times.iter().max().copied())
                .max()
                .unwrap_or(ended_ms)
                - started_ms) as f64
                / 1000.0,
            load_start,
            load_max,
            faults_stopped,
            config,
            kinds,
        }
    }

    /// 100% terminal, 100% completed (every stand-in is correct), no duplicate episode or
    /// step, no evidence lost, no log entry lost across a fault of the Redis primary. (The
    /// long run's goals of recovery time and hits per fault kind are in [`ChaosReport::goals`].)
    pub fn goals_met(&self) -> bool {
        self.terminal == self.runs
            && self.completed == self.runs
            && self.duplicate_episodes.is_empty()
            && self.duplicate_log_steps.is_empty()
            && self.lost_evidence.is_empty()
            && self.log_checks().1.is_empty()
            && self.faults_stopped.is_none()
    }

    /// The faults of the Redis primary whose logs were compared, and what they lost.
    pub fn log_checks(&self) -> (usize, Vec<String>) {
        let checks: Vec<&LogCheck> = self
            .faults
            .iter()
            .filter_map(|f| f.log_check.as_ref())
            .collect();
        let lost = checks.iter().flat_map(|c| c.lost.iter().cloned()).collect();
        (checks.len(), lost)
    }
}

/// `DIR/timelines.tsv` (every run's log entries: run, at, kind, generation, round,
/// worker) and `DIR/faults.tsv` (every fault: at, back, component, action, target), so
/// the figures can be traced to the runs after the stack is gone.
pub(crate) fn write_timelines(
    dir: &std::path::Path,
    findings: &[RunFindings],
    faults: &[Fault],
) -> std::io::Result<()> {
    use std::fmt::Write as _;
    let mut runs = String::from("run\tat_ms\tkind\tgeneration\tround\tworker\n");
    for f in findings {
        for e in &f.timeline {
            let _ = writeln!(
                runs,
                "{}\t{}\t{}\t{}\t{}\t{}",
                f.id,
                e.at_ms,
                e.kind,
                e.generation,
                e.round,
                e.worker.as_deref().unwrap_or("-")
            );
        }
    }
    let mut table = String::from("at_ms\tback_ms\tcomponent\taction\ttarget\n");
    for f in faults {
        let _ = writeln!(
            table,
            "{}\t{}\t{}\t{}\t{}",
            f.at_ms,
            f.back_ms,
            f.component.name(),
            f.action.name(),
            f.target
        );
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("timelines.tsv"), runs)?;
    std::fs::write(dir.join("faults.tsv"), table)
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
