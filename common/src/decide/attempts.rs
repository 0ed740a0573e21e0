//! A step of several attempts (`budget.attempts = N > 1`): its N sibling episodes start,
//! finish and get a checks-only audit each, in any order. As soon as one passes every blocking
//! criterion the others are cancelled; otherwise the step waits until every sibling has
//! settled (scored, failed or lost). Then the winner is chosen (`attempt_choice`) and its
//! candidate goes on to the round's full audit, as a step of one episode does; the losers are
//! logged as rejected candidates and summarised in the round's one line of history.

use super::attempt_choice::{choose_winner, Contender};
use super::audit_outcome::apply_audit;
use super::exec_feedback::remembered_audit;
use super::round_parts::{
    log_exec_result, reuse_earlier_audit, round_summary, same_contract, Produced,
};
use super::transition::{Decision, Distrust};
use super::tx::Tx;
use crate::state::{
    Attempt, AttemptScore, AttemptStage, DeadlineKind, EpisodeStart, LogEvent, Phase, RunRecord,
    Target,
};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::dispatch_id::{DispatchId, StepKey};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::{CheckVerdict, Evidence, Integrity};
use loopgate_protocol::wire::{
    AuditPurpose, AuditReport, AuditRequest, EpisodeRole, EpisodeStarted, ExecResult, Message,
};

/// Later starts of one sibling logged at most (redeliveries after lost workers).
const MAX_SIBLING_RESTARTS: u64 = 8;

/// Whether the step in flight runs as several sibling episodes.
pub(super) fn is_sibling_step(record: &RunRecord) -> bool {
    !siblings(record).is_empty()
}

fn siblings(record: &RunRecord) -> &[Attempt] {
    match &record.phase {
        Phase::Executing { attempts, .. } => attempts,
        _ => &[],
    }
}

fn sibling_mut(tx: &mut Tx, index: u32) -> Option<&mut Attempt> {
    match &mut tx.record.phase {
        Phase::Executing { attempts, .. } => attempts.iter_mut().find(|a| a.index == index),
        _ => None,
    }
}

/// The step's deadline covers `secs` from now: a sibling that starts (or a checks-only audit
/// that goes out) later than the others moves it on, never back. Each sibling's first start
/// moves it at most once, so no worker can keep the step waiting forever.
fn cover(tx: &mut Tx, secs: u64) {
    let at_ms = tx.now.saturating_add((secs as i64).saturating_mul(1000));
    let later = tx
        .record
        .deadlines
        .phase
        .filter(|d| d.kind == DeadlineKind::ExecEpisode && d.at_ms >= at_ms);
    if later.is_none() {
        tx.set_deadline(DeadlineKind::ExecEpisode, secs);
    }
}

/// A worker started sibling `started.attempt` of the step in flight (the caller checked the
/// generation, round and role). Its first start covers its episode in the step's deadline; a
/// redelivery's start is logged; a repeat of a start already seen is a security event.
pub(super) fn on_sibling_started(
    record: &RunRecord,
    started: &EpisodeStarted,
    now: i64,
) -> Decision {
    let k = started.attempt;
    let Some(a) = siblings(record).iter().find(|a| a.index == k) else {
        return Decision::Ignore(format!("round {} has no attempt {k}", started.round));
    };
    if !matches!(a.stage, AttemptStage::Queued | AttemptStage::Running) {
        return Decision::Ignore(format!(
            "attempt {k} of round {} is {} already",
            started.round,
            a.stage.as_str()
        ));
    }
    if started.delivery_attempt <= a.started {
        return Decision::Distrusted(Distrust {
            kind: "episode_started",
            reason: "repeated_episode_start",
            detail: format!(
                "another start of delivery {} of attempt {k} of round {} (by {:?}; delivery {} started already)",
                started.delivery_attempt, started.round, started.worker, a.started
            ),
        });
    }
    let first = a.started == 0;
    if !first && started.delivery_attempt > MAX_SIBLING_RESTARTS {
        return Decision::Ignore(format!(
            "attempt {k} of round {} restarted more than {MAX_SIBLING_RESTARTS} times",
            started.round
        ));
    }
    let mut tx = Tx::new(record, now);
    let b = &record.task.budget;
    let queued_ms = first
        .then_some(record.deadlines.queued_since_ms)
        .flatten()
        .map(|since| now.saturating_sub(since).max(0));
    if first {
        cover(
            &mut tx,
            b.executor_episode_secs.saturating_add(b.episode_grace_secs),
        );
        if tx.record.deadlines.episode_started.is_none() {
            tx.record.deadlines.episode_started = Some(EpisodeStart {
                role: EpisodeRole::Executor,
                round: started.round,
                attempt: started.delivery_attempt,
                at_ms: now,
                latest_attempt: 0,
                restarts: 0,
            });
        }
    }
    if let Some(a) = sibling_mut(&mut tx, k) {
        a.started = started.delivery_attempt;
        a.worker = Some(started.worker.clone());
        a.stage = AttemptStage::Running;
    }
    if siblings(&tx.record).iter().all(|a| a.started > 0) {
        tx.picked_up();
    }
    tx.log(LogEvent::EpisodeStarted {
        role: EpisodeRole::Executor,
        worker: started.worker.clone(),
        attempt: started.delivery_attempt,
        queued_ms,
        step_attempt: Some(k),
    });
    tx.finish()
}

/// Sibling `result.attempt`'s episode ended (the caller checked usage, generation and round):
/// its tokens count, and its candidate goes to a checks-only audit (or takes the score of an
/// identical candidate's).
pub(super) fn on_sibling_exec(record: &RunRecord, result: &ExecResult, now: i64) -> Decision {
    let k = result.attempt;
    let Some(a) = siblings(record).iter().find(|a| a.index == k) else {
        return Decision::Ignore(format!("round {} has no attempt {k}", result.round));
    };
    if !matches!(a.stage, AttemptStage::Queued | AttemptStage::Running) {
        return Decision::Ignore(format!(
            "attempt {k} of round {} is {} already",
            result.round,
            a.stage.as_str()
        ));
    }
    let mut tx = Tx::new(record, now);
    tx.record.accounting.usage.executor.add(result.usage);
    let produced = Produced::of(&result.outcome);
    log_exec_result(&mut tx, result, &produced, Some(k));
    if let Some(a) = sibling_mut(&mut tx, k) {
        a.tokens = result
            .usage
            .input_tokens
            .saturating_add(result.usage.output_tokens);
        a.worker = Some(result.worker.clone());
        a.candidate = produced.candidate.clone();
        a.claimed_done = produced.claimed_done;
        a.summary = match &produced.error {
            Some(e) => format!("executor failed: {e}"),
            None => produced.summary.clone(),
        };
        a.stage = AttemptStage::Failed;
    }
    if tx.check_spend_budget() {
        return tx.finish();
    }
    if let Some(candidate) = produced.candidate {
        score_or_audit(&mut tx, k, candidate);
    }
    settle(tx)
}

/// Sibling `k`'s candidate is scored: by an identical candidate's score or audit in flight,
/// by an earlier audit of the same snapshot, or by a checks-only audit dispatched now.
fn score_or_audit(tx: &mut Tx, k: u32, candidate: String) {
    let twin = siblings(&tx.record)
        .iter()
        .filter(|a| a.index != k && a.candidate.as_deref() == Some(candidate.as_str()))
        .find(|a| matches!(a.stage, AttemptStage::Scored | AttemptStage::Auditing))
        .map(|a| (a.stage, a.score));
    let remembered = remembered_audit(&tx.record, &candidate).map(|earlier| {
        let violation = earlier.verdicts.integrity == Integrity::Violation;
        let changed = earlier.changed_paths.len() as u32;
        (
            earlier.round,
            score(
                &tx.record.contract,
                &earlier.evidence,
                &candidate,
                violation,
                changed,
            ),
        )
    });
    let (stage, score) = match (twin, remembered) {
        (Some((stage, score)), _) => (stage, score),
        (None, Some((from_round, score))) => {
            tx.log(LogEvent::AuditReused {
                snapshot: candidate.clone(),
                from_round,
            });
            (AttemptStage::Scored, Some(score))
        }
        (None, None) => {
            dispatch_checks_only_audit(tx, k, candidate);
            (AttemptStage::Auditing, None)
        }
    };
    if let Some(a) = sibling_mut(tx, k) {
        a.stage = stage;
        a.score = score;
    }
}

/// The checks-only audit of sibling `k`'s candidate (no judge, no rubric; it completes
/// nothing), under its own dispatch id; the step's deadline covers it.
fn dispatch_checks_only_audit(tx: &mut Tx, k: u32, candidate: String) {
    let r = &tx.record;
    let (objective, write_scope) = match &r.phase {
        Phase::Executing { increment, .. } => {
            (increment.objective.clone(), increment.write_scope.clone())
        }
        _ => (String::new(), Vec::new()),
    };
    let step = StepKey {
        run_id: &r.id,
        generation: r.generation,
        round: r.round,
    };
    let msg_id = DispatchId::attempt_audit(step, k).into_string();
    let request = AuditRequest {
        run_id: r.id.clone(),
        generation: r.generation,
        round: r.round,
        purpose: AuditPurpose::Round,
        contract: r.contract.clone(),
        objective,
        write_scope,
        base_snapshot: r.snapshot.clone(),
        candidate_snapshot: candidate.clone(),
        auditor_profile: r.task.roles.auditor.clone(),
        episode_secs: r.task.budget.auditor_episode_secs,
        gui: r.task.gui.clone(),
        completes_run: false,
        unquoted_met: !r.task.judge_quotes,
        mechanical_only: true,
    };
    let secs = r
        .task
        .budget
        .start_secs
        .saturating_add(r.task.budget.auditor_episode_secs);
    tx.publish(Target::Audit, msg_id, Message::AuditRequest(request));
    tx.log(LogEvent::AuditDispatched {
        purpose: AuditPurpose::Round,
        candidate,
        checks_only: true,
        baseline: false,
    });
    cover(tx, secs);
}

/// What a checks-only audit found on `candidate`: the blocking criteria with pass evidence
/// bound to it.
fn score(
    contract: &Contract,
    evidence: &[Evidence],
    candidate: &str,
    integrity_violation: bool,
    changed_paths: u32,
) -> AttemptScore {
    let passes = |id: &str| {
        evidence.iter().any(|e| {
            e.check_id == id && e.artifact_version == candidate && e.verdict == CheckVerdict::Pass
        })
    };
    AttemptScore {
        passing: contract.blocking().filter(|c| passes(&c.id)).count() as u32,
        blocking: contract.blocking().count() as u32,
        integrity_violation,
        changed_paths,
    }
}

/// A checks-only audit of a sibling's candidate came back (`report.mechanical_only`; the
/// caller checked its usage): every sibling waiting on that snapshot takes its score.
pub(super) fn on_sibling_audit(record: &RunRecord, report: &AuditReport, now: i64) -> Decision {
    if report.generation != record.generation {
        return Decision::Ignore(format!("stale generation {}", report.generation));
    }
    let pending = record.round == report.round
        && report.purpose == AuditPurpose::Round
        && siblings(record).iter().any(|a| {
            a.stage == AttemptStage::Auditing && a.candidate.as_deref() == Some(&report.snapshot)
        });
    if !pending {
        return Decision::Ignore(format!(
            "no checks-only audit of snapshot {} in round {} is pending",
            report.snapshot, report.round
        ));
    }
    if let Err(why) = same_contract(record, report) {
        return Decision::Ignore(why);
    }
    let mut tx = Tx::new(record, now);
    tx.record.accounting.usage.auditor.add(report.usage);
    let violation = report.verdicts.integrity == Integrity::Violation;
    let changed = report.changed_paths.len() as u32;
    let score = score(
        &record.contract,
        &report.evidence,
        &report.snapshot,
        violation,
        changed,
    );
    let mut first = None;
    if let Phase::Executing { attempts, .. } = &mut tx.record.phase {
        for a in attempts.iter_mut().filter(|a| {
            a.stage == AttemptStage::Auditing && a.candidate.as_deref() == Some(&report.snapshot)
        }) {
            first = first.or(Some(a.index));
            a.stage = AttemptStage::Scored;
            a.score = Some(score);
        }
    }
    tx.log(LogEvent::AuditReport {
        purpose: AuditPurpose::Round,
        worker: report.worker.clone(),
        snapshot: report.snapshot.clone(),
        verdicts: report.verdicts,
        passing: score.passing,
        checked: score.blocking,
        gaps: report.gaps.clone(),
        downgraded: false,
        step_attempt: first,
    });
    if tx.check_spend_budget() {
        return tx.finish();
    }
    settle(tx)
}

/// The step decides once a sibling passes every blocking criterion (the others are
/// cancelled) or every sibling has settled; until then it waits.
fn settle(tx: Tx) -> Decision {
    let all = siblings(&tx.record);
    let early = all
        .iter()
        .find(|a| a.score.is_some_and(|s| s.passes_all()))
        .map(|a| a.index);
    if early.is_none() && !all.iter().all(Attempt::is_settled) {
        return tx.finish();
    }
    decide_round(tx, early)
}

/// The capability of the step in flight when its deadline passed while some of its siblings
/// still wait in the queue and a live executor serves that capability (`serving`; `None`: the
/// sweep does not know): they wait behind busy executors.
pub(super) fn queued_behind_busy(
    record: &RunRecord,
    serving: Option<&[Capability]>,
) -> Option<Capability> {
    let Phase::Executing {
        capability,
        attempts,
        ..
    } = &record.phase
    else {
        return None;
    };
    let queued = attempts.iter().any(|a| a.stage == AttemptStage::Queued);
    (queued && serving?.contains(capability)).then_some(*capability)
}

/// Queue wait of a step of several attempts, not a failure: the siblings past their own time
/// (started, or audited, before the deadline that covered them passed) are cancelled, the
/// queued ones keep waiting under a fresh start budget (as `LogEvent::QueueWait` says).
pub(super) fn on_queue_wait(mut tx: Tx, capability: Capability) -> Decision {
    let late: Vec<String> = siblings(&tx.record)
        .iter()
        .filter(|a| !a.is_settled() && a.stage != AttemptStage::Queued)
        .map(|a| a.index.to_string())
        .collect();
    if !late.is_empty() {
        let detail = format!(
            "attempt(s) {} of round {} did not finish in time; the queued ones wait on",
            late.join(", "),
            tx.record.round
        );
        tx.log(LogEvent::DeadlineMissed {
            kind: DeadlineKind::ExecEpisode,
            detail: detail.clone(),
        });
        tx.cancel_siblings(&detail, true);
    }
    let b = &tx.record.task.budget;
    let start_secs = b.start_secs;
    let since = tx.record.deadlines.queued_since_ms.unwrap_or(tx.now);
    tx.set_deadline(DeadlineKind::ExecStart, start_secs);
    tx.log(LogEvent::QueueWait {
        round: tx.record.round,
        capability,
        waited_ms: tx.now.saturating_sub(since).max(0),
    });
    tx.finish()
}

/// The step's deadline passed with siblings unsettled: they are cancelled (lost), and the
/// round goes on with what was scored, or fails as a step of one episode does.
pub(super) fn on_deadline(mut tx: Tx, detail: &str) -> Decision {
    tx.cancel_siblings(detail, false);
    if siblings(&tx.record).iter().any(|a| a.score.is_some()) {
        return decide_round(tx, None);
    }
    tx.episode_in_flight = false;
    tx.feedback(format!("{detail}; its results will be ignored."));
    tx.continue_after_failure(detail);
    tx.finish()
}

/// Choose the winner (`early`: the sibling that passed everything), log the losers, keep
/// one round of history, and send the winner's candidate to the round's full audit; with no
/// candidate that may win, the round failed.
fn decide_round(mut tx: Tx, early: Option<u32>) -> Decision {
    if let Some(k) = early {
        tx.cancel_siblings(
            &format!("attempt {k} passed every blocking criterion"),
            false,
        );
    }
    let (increment, capability, all) = match &tx.record.phase {
        Phase::Executing {
            increment,
            capability,
            attempts,
            ..
        } => (increment.clone(), *capability, attempts.clone()),
        _ => return tx.finish(),
    };
    let contenders: Vec<Contender> = all.iter().filter_map(Contender::of).collect();
    let winner = early
        .or_else(|| choose_winner(&contenders))
        .and_then(|k| all.iter().find(|a| a.index == k));
    let others = losers_line(&all, winner.map(|w| w.index));
    reject_losers(&mut tx, &all, winner);
    let of = all.len() as u32;
    let round = tx.record.round;
    let Some((w, candidate)) = winner.and_then(|w| Some((w, w.candidate.clone()?))) else {
        let line = format!("none of the {of} attempts produced a candidate that may win: {others}");
        let produced = Produced {
            candidate: None,
            summary: String::new(),
            claimed_done: false,
            tool_calls: 0,
            error: Some(line.clone()),
            self_check_refusals: 0,
        };
        let summary = round_summary(&tx.record, round, &increment, capability, &produced);
        tx.push_history(summary);
        tx.episode_in_flight = false;
        tx.feedback(format!("Round {round}: {line}"));
        tx.continue_after_failure(&line);
        return tx.finish();
    };
    let (passing, blocking) = w.score.map(|s| (s.passing, s.blocking)).unwrap_or((0, 0));
    tx.log(LogEvent::AttemptWon {
        attempt: w.index,
        of,
        candidate: candidate.clone(),
        worker: w.worker.clone().unwrap_or_default(),
        tokens: w.tokens,
        passing,
        blocking,
        early: early.is_some(),
        others: others.clone(),
    });
    let mut won = format!(
        "{} [attempt {} of {of} won: {passing}/{blocking} checks",
        w.summary, w.index
    );
    if !others.is_empty() {
        won.push_str(&format!("; {others}"));
    }
    won.push(']');
    let produced = Produced {
        candidate: Some(candidate.clone()),
        summary: won,
        claimed_done: w.claimed_done,
        tool_calls: 0,
        error: None,
        self_check_refusals: 0,
    };
    let summary = round_summary(&tx.record, round, &increment, capability, &produced);
    tx.push_history(summary);
    full_audit(tx, round, &produced, candidate, increment)
}

/// Every loser with a candidate (other than the winner's very snapshot) is a rejected
/// candidate, its snapshot kept: outscored, an integrity violation, or cancelled unscored.
fn reject_losers(tx: &mut Tx, all: &[Attempt], winner: Option<&Attempt>) {
    let won = winner.and_then(|w| w.candidate.as_ref());
    for a in all
        .iter()
        .filter(|a| Some(a.index) != winner.map(|w| w.index))
    {
        if let Some(candidate) = a.candidate.as_ref().filter(|c| Some(*c) != won) {
            tx.log(LogEvent::CandidateRejected {
                candidate: candidate.clone(),
                reason: rejection(a).to_string(),
            });
        }
    }
}

/// The winner's candidate gets the round's own audit (an earlier audit of the very snapshot
/// is reused, as for a step of one episode).
fn full_audit(
    mut tx: Tx,
    round: u32,
    produced: &Produced,
    candidate: String,
    increment: loopgate_protocol::wire::Increment,
) -> Decision {
    let before = tx.record.clone();
    if let Some(outcome) =
        reuse_earlier_audit(&mut tx, &before, round, AuditPurpose::Round, produced)
    {
        tx.episode_in_flight = false;
        return apply_audit(tx, outcome);
    }
    tx.dispatch_audit(
        AuditPurpose::Round,
        candidate,
        increment.objective,
        increment.write_scope,
    );
    tx.finish()
}

/// Why a losing sibling's candidate was not taken.
fn rejection(a: &Attempt) -> &'static str {
    match a.score {
        Some(s) if s.integrity_violation => "integrity violation",
        Some(_) => "outscored",
        None => "cancelled",
    }
}

/// The losers in one line: `attempt 1: 5/9 checks, outscored; attempt 3: failed`.
fn losers_line(all: &[Attempt], winner: Option<u32>) -> String {
    all.iter()
        .filter(|a| Some(a.index) != winner)
        .map(|a| {
            let what = match (a.stage, a.score) {
                (_, Some(s)) => format!("{}/{} checks, {}", s.passing, s.blocking, rejection(a)),
                (AttemptStage::Failed, None) => "failed".to_string(),
                (AttemptStage::Lost, None) => "cancelled".to_string(),
                (stage, None) => stage.as_str().to_string(),
            };
            format!("attempt {}: {what}", a.index)
        })
        .collect::<Vec<_>>()
        .join("; ")
}
