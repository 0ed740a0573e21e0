//! Events from outside the round: workers starting episodes, deadlines, people (answer,
//! cancel, resume).

use super::attempts::{
    is_sibling_step, on_deadline, on_queue_wait, on_sibling_started, queued_behind_busy,
};
use super::manager_turn::manager_miss;
use super::transition::{Decision, Distrust};
use super::tx::Tx;
use crate::budget::Budget;
use crate::state::{
    DeadlineKind, EpisodeStart, LogEvent, Phase, PlanningStage, RunRecord, RunState,
};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::wire::{EpisodeRole, EpisodeStarted};

pub(super) fn on_cancel(record: &RunRecord, reason: &str, now: i64) -> Decision {
    if record.state.is_terminal() {
        return Decision::Ignore(format!("run is already {}", record.state.as_str()));
    }
    let mut tx = Tx::new(record, now);
    tx.terminal(RunState::Cancelled, reason.to_string());
    tx.finish()
}

pub(super) fn on_answer(record: &RunRecord, text: &str, now: i64) -> Decision {
    if !matches!(record.phase, Phase::WaitingForAnswer { .. }) {
        return Decision::Ignore("the run is not waiting for input".to_string());
    }
    if record.planning.stage == Some(PlanningStage::Approval) {
        return Decision::Ignore(
            "the run waits for contract approval: use `loopgate approve` (or cancel)".to_string(),
        );
    }
    let mut tx = Tx::new(record, now);
    tx.record.state = RunState::Running;
    tx.record.streaks.failed_rounds = 0;
    tx.record.streaks.stagnant_rounds = 0;
    tx.record.streaks.steps_sent_back = 0;
    tx.log(LogEvent::Answered {
        text: text.to_string(),
    });
    tx.feedback(format!("A human answered your question: {text}"));
    tx.continue_work();
    tx.finish()
}

/// A new generation of an ended run: old results are recognised by generation and dropped.
pub(super) fn on_resume(record: &RunRecord, budget: &Budget, now: i64) -> Decision {
    if !record.state.is_terminal() || record.state == RunState::Completed {
        return Decision::Ignore(format!("a {} run cannot be resumed", record.state.as_str()));
    }
    let mut tx = Tx::new(record, now);
    let from_state = record.state;
    let r = &mut tx.record;
    r.generation += 1;
    r.accounting.generation_start_round = r.round;
    r.task.budget = budget.clone();
    r.state = RunState::Running;
    r.terminal_reason = None;
    r.streaks.invalid_decisions = 0;
    r.streaks.failed_rounds = 0;
    r.streaks.stagnant_rounds = 0;
    r.streaks.steps_sent_back = 0;
    // A resumed run gives the clauses it set aside fresh tries.
    r.streaks.clause_tries = None;
    r.streaks.clauses_set_aside.clear();
    // Progress is counted per generation; remembered audits stay valid (same contract).
    r.audit.passing_ever.clear();
    r.audit.failures_seen.clear();
    r.deadlines.wall_ms = budget.max_wall_secs.map(|s| now + (s as i64) * 1000);
    tx.log(LogEvent::Resumed { from_state });
    tx.feedback(format!(
        "The run was resumed after it ended {}: {}",
        from_state.as_str(),
        record.terminal_reason.as_deref().unwrap_or("")
    ));
    tx.continue_work();
    tx.finish()
}

/// Later starts of one step logged at most (redeliveries after lost workers).
pub(super) const MAX_LOGGED_RESTARTS: u32 = 8;

/// A worker announced that it started the step in flight. The first start of a step sets
/// its episode deadline; a later one never moves it (whoever holds a worker's credentials
/// could otherwise keep a run waiting forever): a redelivery's start (a higher attempt than
/// any before) is only logged, a repeat of an attempt already started is a security event.
pub(super) fn on_episode_started(
    record: &RunRecord,
    started: &EpisodeStarted,
    now: i64,
) -> Decision {
    if started.generation != record.generation {
        return Decision::Ignore(format!("stale generation {}", started.generation));
    }
    if started.role == EpisodeRole::Executor
        && record.round == started.round
        && is_sibling_step(record)
    {
        return on_sibling_started(record, started, now);
    }
    let secs = match (&record.phase, started.role) {
        (Phase::Executing { round, .. }, EpisodeRole::Executor) if *round == started.round => (
            DeadlineKind::ExecEpisode,
            record.task.budget.executor_episode_secs,
        ),
        (Phase::Auditing { round, .. }, EpisodeRole::Auditor) if *round == started.round => {
            (DeadlineKind::Audit, record.task.budget.auditor_episode_secs)
        }
        _ => {
            return Decision::Ignore(format!(
                "no {:?} episode of round {} is pending",
                started.role, started.round
            ))
        }
    };
    if let Some(first) = record
        .deadlines
        .episode_started
        .filter(|s| s.role == started.role && s.round == started.round)
    {
        return start_again(record, first, started, now);
    }
    let mut tx = Tx::new(record, now);
    tx.set_deadline(
        secs.0,
        secs.1.saturating_add(record.task.budget.episode_grace_secs),
    );
    tx.picked_up();
    tx.record.deadlines.episode_started = Some(EpisodeStart {
        role: started.role,
        round: started.round,
        attempt: started.delivery_attempt,
        at_ms: now,
        latest_attempt: 0,
        restarts: 0,
    });
    tx.log(LogEvent::EpisodeStarted {
        step_attempt: None,
        role: started.role,
        worker: started.worker.clone(),
        attempt: started.delivery_attempt,
        queued_ms: (started.role == EpisodeRole::Executor)
            .then_some(record.deadlines.queued_since_ms)
            .flatten()
            .map(|since| now.saturating_sub(since).max(0)),
    });
    tx.finish()
}

/// Another start of an episode that started already (`first`): its deadline stays. A higher
/// attempt than any before is a redelivery and is logged (at most [`MAX_LOGGED_RESTARTS`]
/// times); any other is a repeat no honest worker sends.
fn start_again(
    record: &RunRecord,
    first: EpisodeStart,
    started: &EpisodeStarted,
    now: i64,
) -> Decision {
    let latest = first.latest_attempt.max(first.attempt);
    let what = format!(
        "the {:?} episode of round {} started already (attempt {} at {}); its deadline stays",
        started.role, started.round, first.attempt, first.at_ms
    );
    if started.delivery_attempt <= latest {
        return Decision::Distrusted(Distrust {
            kind: "episode_started",
            reason: "repeated_episode_start",
            detail: format!(
                "another start of attempt {} (by {:?}; attempt {latest} started already): {what}",
                started.delivery_attempt, started.worker
            ),
        });
    }
    if first.restarts >= MAX_LOGGED_RESTARTS {
        return Decision::Ignore(format!(
            "attempt {} started after {MAX_LOGGED_RESTARTS} restarts: {what}",
            started.delivery_attempt
        ));
    }
    let mut tx = Tx::new(record, now);
    tx.record.deadlines.episode_started = Some(EpisodeStart {
        latest_attempt: started.delivery_attempt,
        restarts: first.restarts + 1,
        ..first
    });
    tx.log(LogEvent::EpisodeStarted {
        step_attempt: None,
        role: started.role,
        worker: started.worker.clone(),
        attempt: started.delivery_attempt,
        queued_ms: None,
    });
    tx.finish()
}

/// Whether a passed start deadline is queue wait: the step is still queued and a live
/// executor serves its capability, so it waits behind busy workers. `serving` is `None` when
/// the sweep does not know (then every passed start deadline is a miss, as before).
pub(super) fn is_queue_wait(
    kind: DeadlineKind,
    phase: &Phase,
    serving: Option<&[Capability]>,
) -> Option<Capability> {
    match (kind, phase, serving) {
        (DeadlineKind::ExecStart, Phase::Executing { capability, .. }, Some(serving))
            if serving.contains(capability) =>
        {
            Some(*capability)
        }
        _ => None,
    }
}

/// The deadline sweep: act on the wall-clock deadline or the phase deadline if one has passed.
/// A start deadline passing while the step's capability is `serving` is queue wait: logged,
/// the start budget counted again, no failed round.
pub(super) fn on_tick(record: &RunRecord, now: i64, serving: Option<&[Capability]>) -> Decision {
    if let Some(wall) = record.deadlines.wall_ms.filter(|w| now >= *w) {
        let mut tx = Tx::new(record, now);
        let secs = record.task.budget.max_wall_secs.unwrap_or(0);
        tx.log(LogEvent::DeadlineMissed {
            kind: DeadlineKind::Decision,
            detail: format!("wall-clock deadline passed at {wall}"),
        });
        tx.terminal(
            RunState::BudgetExhausted,
            format!("wall-clock budget of {secs} s exhausted"),
        );
        return tx.finish();
    }
    let Some(deadline) = record.deadlines.phase.filter(|d| now >= d.at_ms) else {
        return Decision::Ignore("no deadline has passed".to_string());
    };
    let mut tx = Tx::new(record, now);
    let round = record.round;
    let b = &record.task.budget;
    if let Some(capability) = is_queue_wait(deadline.kind, &record.phase, serving) {
        let since = record
            .deadlines
            .queued_since_ms
            .unwrap_or_else(|| deadline.at_ms - (b.start_secs as i64).saturating_mul(1000));
        tx.set_deadline(DeadlineKind::ExecStart, b.start_secs);
        tx.log(LogEvent::QueueWait {
            round,
            capability,
            waited_ms: now.saturating_sub(since).max(0),
        });
        return tx.finish();
    }
    let siblings_due = is_sibling_step(record)
        && matches!(
            deadline.kind,
            DeadlineKind::ExecStart | DeadlineKind::ExecEpisode
        );
    if let Some(capability) = queued_behind_busy(record, serving).filter(|_| siblings_due) {
        return on_queue_wait(tx, capability);
    }
    let detail = match (deadline.kind, &record.phase) {
        (DeadlineKind::Decision, _) => format!(
            "the manager did not decide within {} s",
            b.manager_episode_secs
        ),
        (DeadlineKind::ExecStart, Phase::Executing { capability, .. }) => format!(
            "no executor with capability `{}` picked up round {round} within {} s",
            capability.as_str(),
            b.start_secs
        ),
        (DeadlineKind::ExecStart, _) => {
            format!("round {round} was not picked up within {} s", b.start_secs)
        }
        (DeadlineKind::ExecEpisode, _) => {
            format!(
                "the executor episode of round {round} did not finish within {} s",
                b.executor_episode_secs
            )
        }
        (DeadlineKind::Audit, _) if round == 0 => {
            "the audit of the starting workspace did not finish in time".to_string()
        }
        (DeadlineKind::Audit, _) => format!("the audit of round {round} did not finish in time"),
    };
    tx.log(LogEvent::DeadlineMissed {
        kind: deadline.kind,
        detail: detail.clone(),
    });
    if siblings_due {
        return on_deadline(tx, &detail);
    }
    if super::baseline::is_pending(record) {
        return super::baseline::skip(tx, &detail);
    }
    match deadline.kind {
        DeadlineKind::Decision => manager_miss(&mut tx, detail),
        DeadlineKind::ExecStart => {
            tx.feedback(format!("{detail}; choose another route or try again."));
            tx.continue_after_failure(&detail);
        }
        DeadlineKind::ExecEpisode | DeadlineKind::Audit => {
            tx.cancel_step(&detail);
            tx.feedback(format!("{detail}; its result will be ignored."));
            tx.continue_after_failure(&detail);
        }
    }
    tx.finish()
}

/// A message of this run exhausted its deliveries. Always logged; when it belongs to the step
/// in flight the run moves on now (that step failed) instead of waiting for its deadline.
pub(super) fn on_dead_letter(
    record: &RunRecord,
    kind: &str,
    generation: u32,
    step: u32,
    reason: &str,
    now: i64,
) -> Decision {
    if generation != record.generation {
        return Decision::Ignore(format!("stale generation {generation}"));
    }
    let current = match (&record.phase, kind) {
        // A sibling's message: which sibling is unknown, so the step's deadline settles it.
        (
            Phase::Executing {
                round, attempts, ..
            },
            "exec_request" | "exec_result" | "episode_started",
        ) => *round == step && attempts.is_empty(),
        (Phase::Auditing { round, .. }, "audit_request" | "audit_report" | "episode_started") => {
            *round == step
        }
        (Phase::Deciding { seq }, "decide_request") => *seq == step,
        _ => false,
    };
    let mut tx = Tx::new(record, now);
    tx.log(LogEvent::DeadLetter {
        kind: kind.to_string(),
        reason: reason.to_string(),
    });
    if !current {
        return tx.finish();
    }
    let detail = format!("a {kind} message could not be delivered ({reason})");
    if super::baseline::is_pending(record) {
        return super::baseline::skip(tx, &detail);
    }
    match record.phase {
        Phase::Deciding { .. } => manager_miss(&mut tx, detail),
        _ => {
            tx.cancel_step(&detail);
            tx.feedback(format!("{detail}; the step is abandoned."));
            tx.continue_after_failure(&detail);
        }
    }
    tx.finish()
}
