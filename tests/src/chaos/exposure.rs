//! The run figures of a chaos run per fault kind: a run counts under every kind of fault that
//! landed while it was open (from its first log entry to its last; to the end of the drain
//! for a run that never ended), so a kind of fault that leaves runs stuck, duplicates an
//! episode or loses evidence shows in its own row. A run open during several kinds counts in
//! each of them.

use std::collections::{BTreeMap, BTreeSet};

use super::fault::{Action, Fault};
use crate::RunFindings;

/// The runs open during at least one fault of a kind, and what became of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exposure {
    pub runs: usize,
    pub terminal: usize,
    pub completed: usize,
    /// Duplicate episodes in those runs.
    pub duplicate_episodes: usize,
    /// Evidence records lost in those runs.
    pub lost_evidence: usize,
}

/// [`Exposure`] per fault kind; `duplicates` counts the duplicate episodes of each run by its
/// index in `findings`.
pub(crate) fn by_action(
    findings: &[RunFindings],
    faults: &[Fault],
    duplicates: &BTreeMap<usize, usize>,
) -> BTreeMap<Action, Exposure> {
    let mut out: BTreeMap<Action, Exposure> = BTreeMap::new();
    for (index, run) in findings.iter().enumerate() {
        let Some(opened) = run.entry_times.iter().min().copied() else {
            continue;
        };
        let closed = if run.is_terminal() {
            run.entry_times.iter().max().copied().unwrap_or(opened)
        } else {
            i64::MAX
        };
        let kinds: BTreeSet<Action> = faults
            .iter()
            .filter(|f| f.at_ms >= opened && f.at_ms <= closed)
            .map(|f| f.action)
            .collect();
        for kind in kinds {
            let e = out.entry(kind).or_default();
            e.runs += 1;
            e.terminal += usize::from(run.is_terminal());
            e.completed += usize::from(run.state == "completed");
            e.duplicate_episodes += duplicates.get(&index).copied().unwrap_or(0);
            e.lost_evidence += run.lost_evidence.len();
        }
    }
    out
}

/// How many faults of each kind landed while at least one run was open (its first log entry
/// at or before the fault, its last at or after it, or never ended): faults that hit work in
/// flight.
pub(crate) fn faults_with_work(
    findings: &[RunFindings],
    faults: &[Fault],
) -> BTreeMap<Action, usize> {
    let open: Vec<(i64, i64)> = findings
        .iter()
        .filter_map(|run| {
            let opened = run.entry_times.iter().min().copied()?;
            let closed = if run.is_terminal() {
                run.entry_times.iter().max().copied().unwrap_or(opened)
            } else {
                i64::MAX
            };
            Some((opened, closed))
        })
        .collect();
    let mut out: BTreeMap<Action, usize> = BTreeMap::new();
    for fault in faults {
        if open
            .iter()
            .any(|(opened, closed)| fault.at_ms >= *opened && fault.at_ms <= *closed)
        {
            *out.entry(fault.action).or_default() += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::fault::Component;

    fn run(state: &str, times: &[i64], lost: usize) -> RunFindings {
        RunFindings {
            id: format!("run-{}", times.first().copied().unwrap_or(0)),
            state: state.into(),
            duplicate_steps: Vec::new(),
            lost_evidence: (0..lost).map(|i| format!("snap-{i}")).collect(),
            audited: 0,
            executor_starts: BTreeMap::new(),
            auditor_starts: BTreeMap::new(),
            entry_times: times.to_vec(),
            timeline: Vec::new(),
            exec_objectives: Vec::new(),
        }
    }

    fn fault(action: Action, at_ms: i64) -> Fault {
        Fault {
            component: Component::Executor,
            action,
            target: "exec-1".into(),
            at_ms,
            back_ms: at_ms + 10,
            log_check: None,
        }
    }

    #[test]
    fn runs_count_under_each_kind_of_fault_they_were_open_during() {
        let findings = vec![
            // 0: open 0-100, through a kill at 50: completed.
            run("completed", &[0, 100], 0),
            // 1: open 200-300 through a partition at 250, lost one evidence record.
            run("completed", &[200, 300], 1),
            // 2: never ended; last entry at 400, a freeze at 500 still counts.
            run("running", &[350, 400], 0),
            // 3: open 0-600 through everything: failed, with a duplicate.
            run("failed", &[0, 600], 0),
            // 4: ended before every fault but the kill... at 10-20: none.
            run("completed", &[10, 20], 0),
        ];
        let faults = vec![
            fault(Action::Kill, 50),
            fault(Action::Partition, 250),
            fault(Action::Freeze, 500),
        ];
        let duplicates = BTreeMap::from([(3, 2)]);
        let got = by_action(&findings, &faults, &duplicates);
        let want = BTreeMap::from([
            (
                Action::Kill,
                Exposure {
                    runs: 2,
                    terminal: 2,
                    completed: 1,
                    duplicate_episodes: 2,
                    lost_evidence: 0,
                },
            ),
            (
                Action::Partition,
                Exposure {
                    runs: 2,
                    terminal: 2,
                    completed: 1,
                    duplicate_episodes: 2,
                    lost_evidence: 1,
                },
            ),
            (
                Action::Freeze,
                Exposure {
                    runs: 2,
                    terminal: 1,
                    completed: 0,
                    duplicate_episodes: 2,
                    lost_evidence: 0,
                },
            ),
        ]);
        assert_eq!(got, want);
    }

    #[test]
    fn a_fault_counts_as_hitting_work_when_a_run_was_open_at_it() {
        let findings = vec![
            run("completed", &[0, 100], 0),
            // Never ended: open from 350 to the end.
            run("running", &[350, 400], 0),
        ];
        let faults = vec![
            fault(Action::Kill, 50),
            // Between the two runs: no work in flight.
            fault(Action::Kill, 200),
            fault(Action::Freeze, 500),
            fault(Action::Partition, 100),
        ];
        let got = faults_with_work(&findings, &faults);
        let want = BTreeMap::from([
            (Action::Kill, 1),
            (Action::Freeze, 1),
            (Action::Partition, 1),
        ]);
        assert_eq!(got, want);
    }
}
