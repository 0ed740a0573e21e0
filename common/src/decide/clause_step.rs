//! The clause policy (`budget.clause_steps`): when every clause of the goal that asks for
//! something has a blocking check, the next step is the first such clause (in the goal's
//! order) whose criteria do not all pass on the current snapshot (its checks, and a judged
//! criterion quoting it), in the goal's own words, with one line on what the earlier clauses
//! built and the checks that must pass. It is dispatched without a manager call.
//!
//! A clause given [`CLAUSE_TRIES`] times in a row and still failing (a step retry of it
//! counts) is set aside: the next failing clause is the step, so one clause the executor
//! cannot do does not hold back the clauses after it.
//!
//! The manager is asked instead when the policy has no step to give: a clause without a
//! blocking check, every clause's checks passing while the gate does not, every failing clause
//! set aside, the run planning its contract, stagnation due, an operator instruction in the
//! current round, the round budget spent, or `budget.manager = false` (every step is the goal
//! then). A goal of one clause is the first step by itself, checked or not.
//!
//! A clause step is a `cli` step. On a task with a `[gui]` table the manager decides the first
//! step (whether the work needs the `gui` route is its call, and only it knows whether this
//! deployment offers that route), and each clause step takes the route of the round before
//! it: the manager's choice carries on until the manager is asked again. Every step carries
//! the task's `[gui]`, so a `cli` step's self-check runs a browser check as the audit does.

use super::manager_turn::{dispatch_step, StepFocus};
use super::progress::stagnation_due;
use super::tx::Tx;
use crate::goal::clause_reading::covering_check;
use crate::goal::criteria::{clause_coverage, same_clause, ClauseCover};
use crate::state::{ClauseTries, LogEvent, RunRecord, RunState};
use loopgate_protocol::contract::Criterion;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::CheckVerdict;

/// Tries in a row one clause gets as the step before the manager is asked.
pub(super) const CLAUSE_TRIES: u32 = 2;

/// A goal clause as the next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ClauseStep {
    /// The clause's index among the goal's clauses (0-based).
    pub clause: usize,
    /// How many clauses the goal has.
    pub of: usize,
    /// The clause, as the goal words it.
    pub text: String,
    /// The executor's instruction: the clause, what earlier clauses built, the checks.
    pub step: String,
    /// This clause's tries as the step in a row, this one included.
    pub tries: u32,
    /// The criteria the step's episode checks itself against: the clause's own and those of
    /// the earlier clauses that pass now (the ground it must keep). Empty: every criterion.
    pub targets: Vec<String>,
}

impl ClauseStep {
    /// The focus its episode gets (see [`dispatch_step`]); `None` for the goal as the first
    /// step (no targets: every criterion).
    pub(super) fn focus(&self) -> Option<StepFocus<'_>> {
        (!self.targets.is_empty()).then_some(StepFocus {
            clause: &self.text,
            targets: &self.targets,
        })
    }
}

/// A clause that asks for something, with the blocking criteria that decide it (at least one
/// of them a check; a judged one counts for whether the clause passes).
struct CheckedClause<'a> {
    index: usize,
    text: String,
    criteria: Vec<&'a Criterion>,
}

/// The goal's clauses split into those a step serves (with the blocking criteria that quote
/// or cover them: the one [`clause_coverage`] names, any other quoting the clause, the check
/// that decides its words) and those
/// that only inform one (files to keep, the problem stated); `None` when a clause that asks
/// for something has no blocking check.
fn checked_clauses(record: &RunRecord) -> Option<(Vec<CheckedClause<'_>>, Vec<String>)> {
    let contract = &record.contract;
    let mut steps = Vec::new();
    let mut context = Vec::new();
    for (index, cover) in clause_coverage(
        &contract.goal,
        &contract.criteria,
        &contract.protected_paths,
    )
    .into_iter()
    .enumerate()
    {
        match &cover.cover {
            ClauseCover::ProtectedPaths(_) | ClauseCover::StatesProblem => {
                context.push(cover.clause);
                continue;
            }
            ClauseCover::Uncovered | ClauseCover::Criterion(_) => {}
        }
        let covering = covering_check(&cover.clause, &cover.reading, &contract.criteria);
        let criteria: Vec<&Criterion> = contract
            .criteria
            .iter()
            .filter(|c| c.blocking)
            .filter(|c| {
                cover.criterion() == Some(c.id.as_str())
                    || covering.is_some_and(|k| k.id == c.id)
                    || c.clause
                        .as_deref()
                        .is_some_and(|q| same_clause(q, &cover.clause))
            })
            .collect();
        if !criteria.iter().any(|c| c.check.is_some()) {
            return None;
        }
        steps.push(CheckedClause {
            index,
            text: cover.clause,
            criteria,
        });
    }
    Some((steps, context))
}

/// The route a clause step takes now: `cli`, or on a `[gui]` task the route of the last round
/// (its first step is the manager's: `None` before any round).
pub(super) fn clause_route(record: &RunRecord) -> Option<Capability> {
    if record.task.gui.is_none() {
        return Some(Capability::Cli);
    }
    record
        .history
        .last()
        .map(|round| round.capability.unwrap_or(Capability::Cli))
}

/// Whether the policy may give a step now, before looking at the clauses.
fn may_choose(record: &RunRecord) -> bool {
    let budget = &record.task.budget;
    let instructed = record
        .steering
        .instructions
        .iter()
        .any(|i| i.generation == record.generation && i.round >= record.round);
    budget.clause_steps
        && budget.manager
        && clause_route(record).is_some()
        && record.planning.stage.is_none()
        && record.rounds_this_generation() < budget.max_rounds
        && !stagnation_due(record)
        && !instructed
}

/// Whether every criterion of `clause` passed on the current snapshot.
fn passes(record: &RunRecord, clause: &CheckedClause) -> bool {
    clause.criteria.iter().all(|c| {
        record
            .audit
            .evidence
            .iter()
            .rev()
            .find(|e| e.artifact_version == record.snapshot && e.check_id == c.id)
            .is_some_and(|e| e.verdict == CheckVerdict::Pass)
    })
}

/// Whether `clause` had its tries and still fails: set aside earlier, or the policy's last
/// clause given [`CLAUSE_TRIES`] times in a row.
fn set_aside(record: &RunRecord, clause: usize) -> bool {
    record.streaks.clauses_set_aside.contains(&(clause as u32))
        || record
            .streaks
            .clause_tries
            .is_some_and(|t| t.clause as usize == clause && t.tries >= CLAUSE_TRIES)
}

/// The tries `clause` has as the step with this one: one more than before when it was the
/// policy's last clause, else the first.
fn tries(record: &RunRecord, clause: usize) -> u32 {
    match record.streaks.clause_tries {
        Some(t) if t.clause as usize == clause => t.tries + 1,
        _ => 1,
    }
}

/// The clause the policy gives as the next step, if it gives one (see the module comment).
pub(super) fn clause_step(record: &RunRecord) -> Option<ClauseStep> {
    if !may_choose(record) {
        return None;
    }
    let (clauses, context) = checked_clauses(record)?;
    let at = clauses
        .iter()
        .position(|c| !passes(record, c) && !set_aside(record, c.index))?;
    let clause = &clauses[at];
    let tries = tries(record, clause.index);
    if tries > CLAUSE_TRIES {
        return None;
    }
    let targets = clauses[..at]
        .iter()
        .filter(|c| passes(record, c))
        .chain([clause])
        .flat_map(|c| c.criteria.iter().map(|k| k.id.clone()))
        .collect();
    Some(ClauseStep {
        clause: clause.index,
        of: clauses.len() + context.len(),
        text: clause.text.clone(),
        step: instruction(&clauses, at, &context),
        tries,
        targets,
    })
}

/// The goal's clauses that ask for something, when the policy may give a step now and each of
/// them has a blocking check (what `budget.goal_first` needs to give the goal as one step);
/// and how many clauses the goal has in all.
pub(super) fn policy_clauses(record: &RunRecord) -> Option<(usize, usize)> {
    if !may_choose(record) {
        return None;
    }
    let (clauses, context) = checked_clauses(record)?;
    Some((clauses.len(), clauses.len() + context.len()))
}

/// The first step of a run: the clause policy's, or, for a goal of one clause that asks for
/// something, the goal itself (it is small enough to be the step).
pub(super) fn first_step(record: &RunRecord) -> Option<ClauseStep> {
    if let Some(step) = clause_step(record) {
        return Some(step);
    }
    if !may_choose(record) {
        return None;
    }
    let contract = &record.contract;
    let covers = clause_coverage(
        &contract.goal,
        &contract.criteria,
        &contract.protected_paths,
    );
    let asking: Vec<usize> = covers
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            !matches!(
                c.cover,
                ClauseCover::ProtectedPaths(_) | ClauseCover::StatesProblem
            )
        })
        .map(|(i, _)| i)
        .collect();
    let [only] = asking.as_slice() else {
        return None;
    };
    Some(ClauseStep {
        clause: *only,
        of: covers.len(),
        text: covers[*only].clause.clone(),
        step: contract.goal.clone(),
        tries: 1,
        targets: Vec::new(),
    })
}

/// The clause at `at` as an instruction: its words, the other words of the goal it must keep,
/// what the clauses before it built, and the checks that must pass.
fn instruction(clauses: &[CheckedClause], at: usize, context: &[String]) -> String {
    let clause = &clauses[at];
    let mut lines = vec![clause.text.clone()];
    if !context.is_empty() {
        lines.push(format!("The goal also says: {}", context.join(" ")));
    }
    if at > 0 {
        let built: Vec<String> = clauses[..at]
            .iter()
            .map(|c| format!("\"{}\"", c.text))
            .collect();
        lines.push(format!(
            "Already built by earlier steps (keep it working): {}.",
            built.join(", ")
        ));
    }
    let commands: Vec<String> = clause
        .criteria
        .iter()
        .filter_map(|c| c.check.as_deref())
        .map(|cmd| format!("`{cmd}`"))
        .collect();
    let noun = if commands.len() == 1 {
        "this check passes"
    } else {
        "these checks pass"
    };
    lines.push(format!(
        "This step is done when {noun}: {}",
        commands.join(", ")
    ));
    lines.join("\n")
}

/// Count a try of `step`'s clause (its round is the next one).
pub(super) fn note_clause_try(tx: &mut Tx, step: &ClauseStep) {
    tx.record.streaks.clause_tries = Some(ClauseTries {
        clause: step.clause as u32,
        tries: step.tries,
        round: tx.record.round + 1,
    });
}

/// Whether the clause of the policy's last step is settled: it passes now, or it has had its
/// tries. `false` when the clauses have no checks to tell (the goal as the first step).
pub(super) fn last_clause_settled(record: &RunRecord) -> bool {
    let Some(tried) = record.streaks.clause_tries else {
        return false;
    };
    let Some((clauses, _)) = checked_clauses(record) else {
        return false;
    };
    tried.tries >= CLAUSE_TRIES
        || clauses
            .iter()
            .find(|c| c.index == tried.clause as usize)
            .is_some_and(|c| passes(record, c))
}

/// Whether the round that just ended ran the clause policy's step (or a retry of it).
pub(super) fn last_round_was_clause_step(record: &RunRecord) -> bool {
    record
        .streaks
        .clause_tries
        .is_some_and(|t| t.round == record.round)
}

/// Dispatch `step` as the next round's step, without a manager decision.
pub(super) fn dispatch_clause_step(tx: &mut Tx, step: ClauseStep) {
    if tx.record.state == RunState::Queued {
        tx.record.state = RunState::Running;
    }
    // The last clause, given its tries and still failing, is set aside for this one.
    if let Some(last) = tx.record.streaks.clause_tries {
        let passes_now = checked_clauses(&tx.record).is_some_and(|(clauses, _)| {
            clauses
                .iter()
                .find(|c| c.index == last.clause as usize)
                .is_some_and(|c| passes(&tx.record, c))
        });
        let aside = &mut tx.record.streaks.clauses_set_aside;
        if last.clause as usize != step.clause
            && last.tries >= CLAUSE_TRIES
            && !passes_now
            && !aside.contains(&last.clause)
        {
            aside.push(last.clause);
        }
    }
    note_clause_try(tx, &step);
    tx.record.streaks.step_retries = 0;
    let event = LogEvent::ClauseStep {
        clause: step.clause as u32 + 1,
        of: step.of as u32,
        text: step.text.clone(),
        attempt: step.tries,
        set_aside: tx
            .record
            .streaks
            .clauses_set_aside
            .iter()
            .map(|c| c + 1)
            .collect(),
    };
    let route = clause_route(&tx.record).unwrap_or(Capability::Cli);
    dispatch_step(tx, route, step.step.clone(), step.focus());
    // Logged in the step's round.
    tx.log(event);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::start_run;
    use crate::decide::tests::evidence;
    use crate::state::{Instruction, PlanningStage};
    use crate::task::parse_task_toml;

    /// A run at round 0 of "Create a.py. Create b.py. Do not change c.py." with a check per
    /// created file and `c.py` protected.
    fn run(budget: &str) -> RunRecord {
        let toml = format!(
            "goal = \"Create a.py. Create b.py. Do not change c.py.\"\nprotected_paths = \
             [\"c.py\"]\n[[acceptance]]\nid = \"a\"\ncheck = \"python3 a.py\"\n\
             [[acceptance]]\nid = \"b\"\ncheck = \"python3 b.py\"\n[budget]\nmax_rounds = 5\n\
             {budget}"
        );
        let mut r = start_run("r", parse_task_toml(&toml).unwrap(), "base", 0).record;
        // As before the first step went out.
        r.round = 0;
        r.streaks.clause_tries = None;
        r
    }

    /// The current snapshot `s1` with `a` and `b` passing as given.
    fn audited(r: &mut RunRecord, a: bool, b: bool) {
        r.round = 1;
        r.snapshot = "s1".into();
        r.audit.evidence = vec![evidence("s1", "a", a), evidence("s1", "b", b)];
    }

    fn tried(r: &mut RunRecord, clause: u32, tries: u32) {
        r.streaks.clause_tries = Some(ClauseTries {
            clause,
            tries,
            round: r.round,
        });
    }

    fn instructed(r: &mut RunRecord, round: u32) {
        r.steering.instructions.push(Instruction {
            at: 0,
            generation: 1,
            round,
            text: "use argparse".into(),
        });
    }

    #[test]
    fn the_step_is_the_first_failing_clause_while_it_has_tries_left() {
        type Edit = fn(&mut RunRecord);
        // (name, budget, edit, (clause, tries) given as the step)
        let cases: [(&str, &str, Edit, Option<(usize, u32)>); 20] = [
            ("nothing audited yet", "", |_| {}, Some((0, 1))),
            ("a passes", "", |r| audited(r, true, false), Some((1, 1))),
            (
                "b passes, a not",
                "",
                |r| audited(r, false, true),
                Some((0, 1)),
            ),
            (
                "a passed on another snapshot",
                "",
                |r| {
                    audited(r, true, false);
                    r.snapshot = "s2".into();
                },
                Some((0, 1)),
            ),
            (
                "a failed once as the step",
                "",
                |r| {
                    audited(r, false, false);
                    tried(r, 0, 1);
                },
                Some((0, 2)),
            ),
            (
                "a failed twice as the step: set aside for b",
                "",
                |r| {
                    audited(r, false, false);
                    tried(r, 0, 2);
                },
                Some((1, 1)),
            ),
            (
                "a set aside, b failed twice: every failing clause set aside",
                "",
                |r| {
                    audited(r, false, false);
                    r.streaks.clauses_set_aside = vec![0];
                    tried(r, 1, 2);
                },
                None,
            ),
            (
                "a set aside and passing now, b fails",
                "",
                |r| {
                    audited(r, true, false);
                    r.streaks.clauses_set_aside = vec![0];
                },
                Some((1, 1)),
            ),
            (
                "b had its tries, a fails now",
                "",
                |r| {
                    audited(r, false, true);
                    tried(r, 1, 2);
                },
                Some((0, 1)),
            ),
            ("every clause passes", "", |r| audited(r, true, true), None),
            (
                "a clause without a check",
                "",
                |r| r.contract.criteria.retain(|c| c.id != "b"),
                None,
            ),
            (
                "b's check is advisory",
                "",
                |r| r.contract.criteria[1].blocking = false,
                None,
            ),
            (
                "b's check passes, its judged criterion not",
                "",
                |r| {
                    audited(r, true, true);
                    r.contract.criteria.push(Criterion {
                        id: "goal-2".into(),
                        description: "judged".into(),
                        check: None,
                        blocking: true,
                        timeout_secs: 60,
                        source: loopgate_protocol::contract::CriterionSource::Goal,
                        clause: Some("Create b.py.".into()),
                    });
                    r.audit.evidence.push(evidence("s1", "goal-2", false));
                },
                Some((1, 1)),
            ),
            ("turned off", "clause_steps = false", |_| {}, None),
            ("no manager", "manager = false", |_| {}, None),
            (
                "planning",
                "",
                |r| r.planning.stage = Some(PlanningStage::Spec),
                None,
            ),
            ("the round budget is spent", "", |r| r.round = 5, None),
            (
                "stagnation escalates",
                "stagnation_rounds = 2",
                |r| {
                    audited(r, false, false);
                    r.streaks.stagnant_rounds = 2;
                },
                None,
            ),
            (
                "an operator instruction in this round",
                "",
                |r| {
                    audited(r, false, false);
                    instructed(r, 1);
                },
                None,
            ),
            (
                "an instruction the manager read before this round",
                "",
                |r| {
                    audited(r, false, false);
                    r.round = 2;
                    instructed(r, 1);
                },
                Some((0, 1)),
            ),
        ];
        for (name, budget, edit, want) in cases {
            let mut r = run(budget);
            edit(&mut r);
            let got = clause_step(&r).map(|s| (s.clause, s.tries));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn the_instruction_is_the_clause_with_what_came_before_and_its_check() {
        let mut r = run("");
        audited(&mut r, true, false);
        let step = clause_step(&r).unwrap();
        assert_eq!(step.text, "Create b.py.");
        assert_eq!(step.of, 3);
        assert_eq!(
            step.step,
            "Create b.py.\nThe goal also says: Do not change c.py.\nAlready built by earlier \
             steps (keep it working): \"Create a.py.\".\nThis step is done when this check \
             passes: `python3 b.py`"
        );
    }

    #[test]
    fn a_goal_of_one_clause_is_the_first_step_checked_or_not() {
        // (goal, check, first step's text or None)
        let cases = [
            ("Create a.py.", "python3 a.py", Some("Create a.py.")),
            // No check decides "Make it fast": the goal itself is the step.
            ("Make it fast.", "python3 bench.py", Some("Make it fast.")),
            ("Make it fast. Make it small.", "python3 bench.py", None),
        ];
        for (goal, check, want) in cases {
            let toml =
                format!("goal = \"{goal}\"\n[[acceptance]]\nid = \"c\"\ncheck = \"{check}\"\n");
            let r = start_run("r", parse_task_toml(&toml).unwrap(), "base", 0).record;
            let got = first_step(&r).map(|s| s.step.lines().next().unwrap_or("").to_string());
            assert_eq!(got.as_deref(), want, "{goal}");
        }
    }
}
