//! Each log event in one line, as people read it: [`LogEvent::headline`]. The manager's API
//! sends it with every log entry (`headline`), `loopgate log`/`watch` print it after
//! `[round N]` and the console shows it on the run's timeline, so a new event is worded here
//! and nowhere else.

use serde::Serialize;
use serde_json::Value;

use super::LogEvent;
use loopgate_protocol::verdict::Verdicts;
use loopgate_protocol::wire::{AgentIsolation, EpisodeRole};

/// How many hex digits of a snapshot id people see.
pub const SNAPSHOT_PREFIX_LEN: usize = 12;
/// How much of a step, objective or summary a headline quotes.
const TASK_EXCERPT_CHARS: usize = 100;
/// How much of an error, reason or answer a headline quotes.
const DETAIL_EXCERPT_CHARS: usize = 200;

/// The first [`SNAPSHOT_PREFIX_LEN`] characters of an id.
pub fn short_id(id: &str) -> &str {
    match id.char_indices().nth(SNAPSHOT_PREFIX_LEN) {
        Some((i, _)) => &id[..i],
        None => id,
    }
}

/// The gate in the one word the CLI, the API (`GateView::word`, log headlines) and the console
/// use: `open` when it passed (the run may complete on its snapshot), `closed` when not.
pub fn gate_word(passed: bool) -> &'static str {
    if passed {
        "open"
    } else {
        "closed"
    }
}

/// First `max` characters of `text` on one line, with `…` when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// The serde (snake_case) name of an enum value.
fn wire_name(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_string(),
    }
}

/// `status/integrity/contract`, e.g. `complete/clean/aligned`.
pub fn verdicts_text(v: &Verdicts) -> String {
    format!(
        "{}/{}/{}",
        wire_name(&v.status),
        wire_name(&v.integrity),
        wire_name(&v.contract)
    )
}

fn detail(text: &str) -> String {
    excerpt(text, DETAIL_EXCERPT_CHARS)
}

fn seconds(ms: i64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

impl LogEvent {
    /// The event in one line (the text after `[round N]` in `loopgate log`).
    pub fn headline(&self) -> String {
        use LogEvent as E;
        match self {
            E::Decision { .. }
            | E::InvalidOutput { .. }
            | E::ManagerError { .. }
            | E::DoneRefused { .. }
            | E::StepSentBack { .. }
            | E::StepRetried { .. }
            | E::ClauseStep { .. }
            | E::GoalStep { .. }
            | E::StepReplaced { .. } => manager_step(self),
            E::ExecDispatched { .. }
            | E::EpisodeStarted { .. }
            | E::EpisodeProgress { .. }
            | E::AuditProgress { .. }
            | E::ExecResult { .. }
            | E::CandidateRejected { .. }
            | E::AuditDispatched { .. }
            | E::AuditReport { .. }
            | E::AttemptWon { .. }
            | E::Gate { .. } => round_step(self),
            E::Submitted { .. }
            | E::SpecWritten { .. }
            | E::ContractProposed { .. }
            | E::ContractInvalid { .. }
            | E::ContractFrozen { .. }
            | E::Continued { .. } => contract(self),
            E::RubricScored { .. }
            | E::Pivot { .. }
            | E::AuditReused { .. }
            | E::BaselineChecked { .. }
            | E::Stagnation { .. }
            | E::Escalated { .. } => progress(self),
            E::Question { .. }
            | E::Answered { .. }
            | E::Instructed { .. }
            | E::Paused { .. }
            | E::Held { .. }
            | E::Unpaused { .. }
            | E::Resumed { .. }
            | E::Terminal { .. } => operator_and_end(self),
            E::AdmissionQueued
            | E::Admitted { .. }
            | E::QueueWait { .. }
            | E::DeadLetter { .. }
            | E::DeadlineMissed { .. } => scheduling(self),
        }
    }
}

/// The manager's decisions, its steps refused, sent back, retried or replaced, and the steps chosen
/// without it.
fn manager_step(event: &LogEvent) -> String {
    use LogEvent as E;
    match event {
        E::Decision { route, task, .. } => format!(
            "next: {} — {}",
            route.as_str(),
            excerpt(task, TASK_EXCERPT_CHARS)
        ),
        E::InvalidOutput { error, .. } => {
            format!("manager output not understood: {}", detail(error))
        }
        E::ManagerError { error, .. } => format!("manager error: {}", detail(error)),
        E::DoneRefused { reasons } => format!("done refused: {}", detail(&reasons.join("; "))),
        E::StepSentBack { reason, .. } => {
            format!("step sent back to the manager: {}", detail(reason))
        }
        E::StepRetried { from_round, step } => format!(
            "round {from_round}'s step failed its audit: an executor tries it again with that audit's evidence, no manager decision (budget.step_retries): {}",
            excerpt(step, 120)
        ),
        E::ClauseStep {
            clause,
            of,
            text,
            attempt,
            set_aside,
        } => {
            let aside = match set_aside.as_slice() {
                [] => String::new(),
                [one] => format!("; clause {one} set aside, still failing after its tries"),
                many => format!(
                    "; clauses {} set aside, still failing after their tries",
                    many.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                ),
            };
            format!(
                "the step is goal clause {clause} of {of} (try {attempt}){aside}, no manager decision (budget.clause_steps): {}",
                excerpt(text, 120)
            )
        }
        E::GoalStep { of } => format!(
            "the step is the whole goal ({of} clauses in one episode, every check), no manager decision (budget.goal_first); the clauses still failing after it are the next steps"
        ),
        E::StepReplaced { dropped, step, .. } => format!(
            "the manager's step kept changing the goal's exact words (`{}`): the executor gets the goal's own words instead: {}",
            excerpt(dropped, 80),
            excerpt(step, 120)
        ),
        other => other.kind().to_string(),
    }
}

/// A round's executor episode, its audit and the gate.
fn round_step(event: &LogEvent) -> String {
    use LogEvent as E;
    match event {
        E::ExecDispatched {
            capability,
            objective,
            attempts,
            ..
        } => format!(
            "executor ({}) dispatched{}: {}",
            capability.as_str(),
            attempts
                .map(|n| format!(" as {n} attempts"))
                .unwrap_or_default(),
            excerpt(objective, TASK_EXCERPT_CHARS)
        ),
        E::EpisodeStarted {
            role,
            worker,
            attempt,
            queued_ms,
            step_attempt,
        } => format!(
            "{}{}",
            sibling_prefix(*step_attempt),
            episode_started(*role, worker, *attempt, *queued_ms)
        ),
        E::EpisodeProgress {
            worker,
            turn,
            tool,
            tool_calls,
            tokens,
            elapsed_ms,
            step_attempt,
        } => format!(
            "{}executor {worker} working: turn {turn}{}, {tool_calls} tool calls, {tokens} tokens, {} elapsed",
            sibling_prefix(*step_attempt),
            tool.as_deref()
                .map(|t| format!(", calling {t}"))
                .unwrap_or_default(),
            seconds(i64::try_from(*elapsed_ms).unwrap_or(i64::MAX))
        ),
        E::AuditProgress {
            worker,
            stage,
            check,
            check_index,
            checks_total,
            elapsed_ms,
        } => audit_progress(
            worker,
            *stage,
            check.as_deref(),
            (*check_index, *checks_total),
            *elapsed_ms,
        ),
        E::ExecResult { step_attempt, .. } => {
            format!("{}{}", sibling_prefix(*step_attempt), exec_result(event))
        }
        E::AttemptWon {
            attempt,
            of,
            candidate,
            passing,
            blocking,
            early,
            others,
            ..
        } => {
            let mut text = format!(
                "attempt {attempt} of {of} won: {passing}/{blocking} checks (snapshot {})",
                short_id(candidate)
            );
            if *early {
                text.push_str("; the others were cancelled");
            }
            if !others.is_empty() {
                text.push_str(&format!("; {}", detail(others)));
            }
            text
        }
        E::CandidateRejected { candidate, reason } => {
            format!(
                "snapshot {} rejected: {}",
                short_id(candidate),
                detail(reason)
            )
        }
        E::AuditDispatched {
            candidate,
            baseline: true,
            ..
        } => format!(
            "baseline checks dispatched for the starting workspace (snapshot {})",
            short_id(candidate)
        ),
        E::AuditDispatched {
            purpose,
            candidate,
            checks_only,
            baseline: false,
        } => format!(
            "{} audit{} dispatched for snapshot {}",
            wire_name(purpose),
            if *checks_only { " (checks only)" } else { "" },
            short_id(candidate)
        ),
        E::AuditReport { step_attempt, .. } => {
            format!("{}{}", sibling_prefix(*step_attempt), audit_report(event))
        }
        E::Gate {
            passed: true,
            snapshot,
            ..
        } => format!(
            "gate: {} on snapshot {}",
            gate_word(true),
            short_id(snapshot)
        ),
        E::Gate { reasons, .. } => format!(
            "gate: {} — {}",
            gate_word(false),
            detail(&reasons.join("; "))
        ),
        other => other.kind().to_string(),
    }
}

/// `attempt K: ` before an entry about sibling K of a step of several attempts.
fn sibling_prefix(step_attempt: Option<u32>) -> String {
    step_attempt
        .map(|k| format!("attempt {k}: "))
        .unwrap_or_default()
}

fn episode_started(
    role: EpisodeRole,
    worker: &str,
    attempt: u64,
    queued_ms: Option<i64>,
) -> String {
    let role = match role {
        EpisodeRole::Executor => "executor",
        EpisodeRole::Auditor => "auditor",
    };
    match queued_ms {
        Some(ms) => format!(
            "{role} {worker} started (attempt {attempt}, queued {})",
            seconds(ms)
        ),
        None => format!("{role} {worker} started (attempt {attempt})"),
    }
}

/// `executor W: snapshot S — its summary (a claim): summary [N tool calls] ... (claims done)`:
/// what the executor said is marked as its word; the audit and the gate say what holds.
fn exec_result(event: &LogEvent) -> String {
    let LogEvent::ExecResult {
        worker,
        candidate,
        summary,
        claimed_done,
        tool_calls,
        error,
        self_check_refusals,
        agent_isolation,
        tokens,
        duration_ms,
        ..
    } = event
    else {
        return event.kind().to_string();
    };
    let mut text = match (candidate, error) {
        (_, Some(error)) => format!("executor {worker} failed: {}", detail(error)),
        (Some(candidate), None) => format!(
            "executor {worker}: snapshot {} — its summary (a claim): {}",
            short_id(candidate),
            excerpt(summary, TASK_EXCERPT_CHARS)
        ),
        (None, None) => format!(
            "executor {worker}: its summary (a claim): {}",
            excerpt(summary, TASK_EXCERPT_CHARS)
        ),
    };
    if *tool_calls > 0 {
        text.push_str(&format!(" [{tool_calls} tool calls]"));
    }
    if let Some(tokens) = tokens.filter(|t| *t > 0) {
        text.push_str(&format!(" [{tokens} tokens]"));
    }
    if *self_check_refusals > 0 {
        text.push_str(&format!(
            " [finish refused {self_check_refusals}x by self-check]"
        ));
    }
    if let Some(warning) = agent_isolation.as_ref().and_then(AgentIsolation::warning) {
        text.push_str(&format!(" [{warning}]"));
    }
    if let Some(ms) = duration_ms {
        text.push_str(&format!(
            " [took {}]",
            seconds(i64::try_from(*ms).unwrap_or(i64::MAX))
        ));
    }
    if *claimed_done {
        text.push_str(" (claims done)");
    }
    text
}

/// `audit: complete/clean/aligned — checks 1/1 passing (downgraded ...); gaps: ...`.
fn audit_report(event: &LogEvent) -> String {
    let LogEvent::AuditReport {
        verdicts,
        passing,
        checked,
        gaps,
        downgraded,
        ..
    } = event
    else {
        return event.kind().to_string();
    };
    let mut text = format!(
        "audit: {} — checks {passing}/{checked} passing",
        verdicts_text(verdicts)
    );
    if *downgraded {
        text.push_str(" (downgraded by the auditor model)");
    }
    if !gaps.is_empty() {
        text.push_str(&format!("; gaps: {}", detail(&gaps.join("; "))));
    }
    text
}

/// The contract: submitted, planned (spec, proposal, freeze) or replaced by `continue`.
fn contract(event: &LogEvent) -> String {
    use LogEvent as E;
    match event {
        E::Submitted {
            base_snapshot,
            criteria: 0,
            ..
        } => format!(
            "submitted: goal only (the contract is planned first), base snapshot {}",
            short_id(base_snapshot)
        ),
        E::Submitted {
            base_snapshot,
            criteria,
            ..
        } => format!(
            "submitted: {criteria} acceptance criteria, base snapshot {}",
            short_id(base_snapshot)
        ),
        E::SpecWritten { snapshot } => format!(
            "planning: spec.md written (snapshot {})",
            short_id(snapshot)
        ),
        E::ContractProposed {
            spec_hash,
            criteria,
            rubric,
            awaiting_approval,
        } => format!(
            "planning: contract {} proposed ({criteria} criteria{}){}",
            short_id(spec_hash),
            if *rubric { ", rubric" } else { "" },
            if *awaiting_approval {
                ", waiting for approval"
            } else {
                ""
            }
        ),
        E::ContractInvalid { error } => {
            format!("planning: proposed contract refused: {}", detail(error))
        }
        E::ContractFrozen {
            spec_hash,
            criteria,
            source,
        } => format!(
            "contract frozen: spec {} ({criteria} criteria, {})",
            short_id(spec_hash),
            wire_name(source)
        ),
        E::Continued {
            goal,
            spec_hash,
            criteria,
            base_snapshot,
        } => format!(
            "continued as a new generation from snapshot {}: contract {} ({criteria} criteria), goal: {}",
            short_id(base_snapshot),
            short_id(spec_hash),
            detail(goal)
        ),
        other => other.kind().to_string(),
    }
}

/// How the rounds progress: the rubric's score, rollbacks, reused audits, stagnation and
/// escalation.
fn progress(event: &LogEvent) -> String {
    use LogEvent as E;
    match event {
        E::RubricScored { summary, .. } => detail(summary),
        E::Pivot { from, to, reason } => format!(
            "PIVOT: snapshot {} rolled back to {} — {}",
            short_id(from),
            short_id(to),
            detail(reason)
        ),
        E::AuditReused {
            snapshot,
            from_round,
        } => format!(
            "snapshot {} is unchanged from round {from_round}: its audit is reused, not run again",
            short_id(snapshot)
        ),
        E::BaselineChecked {
            skipped: Some(why), ..
        } => format!(
            "starting workspace not checked ({}): the first candidate has no baseline to be \
             compared with",
            detail(why)
        ),
        E::BaselineChecked {
            snapshot,
            passing,
            failing,
            ..
        } => format!(
            "starting workspace {} checked: {} of {} blocking criteria pass already{}",
            short_id(snapshot),
            passing.len(),
            passing.len() + failing.len(),
            if passing.is_empty() {
                String::new()
            } else {
                format!(" ({}); a step that breaks one is set aside", passing.join(", "))
            }
        ),
        E::Stagnation {
            rounds,
            escalated_to: Some(profile),
        } => format!(
            "no progress for {rounds} rounds: escalated (executor profile '{profile}', fresh start from the attempt ledger)"
        ),
        E::Stagnation { rounds, .. } => {
            format!("no progress for {rounds} rounds: the manager is told to change approach")
        }
        E::Escalated {
            profile,
            after_failed_rounds,
        } => format!(
            "executor escalated to profile '{profile}' after {after_failed_rounds} failed rounds"
        ),
        other => other.kind().to_string(),
    }
}

/// A person in the loop (questions, answers, instructions, pause and unpause, resume) and the
/// run's end.
fn operator_and_end(event: &LogEvent) -> String {
    use LogEvent as E;
    match event {
        E::Question { question } => format!("question: {question}"),
        E::Answered { text } => format!("answered: {}", detail(text)),
        E::Instructed { text } => format!("instruction: {}", detail(text)),
        E::Paused { phase } => match phase.as_str() {
            "deciding" | "executing" | "auditing" => {
                format!("paused (the {phase} step in flight finishes first)")
            }
            _ => "paused".to_string(),
        },
        E::Held { step } => format!("held: the next step ({step}) waits for unpause"),
        E::Unpaused { paused_ms } => format!("unpaused after {}", seconds(*paused_ms)),
        E::Resumed { from_state } => format!("resumed after {}", from_state.as_str()),
        E::Terminal {
            state,
            reason,
            snapshot,
        } => format!(
            "{}: {} (snapshot {})",
            state.as_str(),
            detail(reason),
            short_id(snapshot)
        ),
        other => other.kind().to_string(),
    }
}

/// Admission, queueing, deadlines and delivery: waits and infrastructure failures, not the
/// agent's.
fn scheduling(event: &LogEvent) -> String {
    use LogEvent as E;
    match event {
        E::DeadlineMissed { detail: text, .. } => format!("deadline missed: {}", detail(text)),
        E::AdmissionQueued => {
            "queued: waiting for an admission slot ([manager] max_active_runs)".to_string()
        }
        E::Admitted { waited_ms } => format!(
            "admitted after {} in the admission queue",
            seconds(*waited_ms)
        ),
        E::QueueWait {
            round,
            capability,
            waited_ms,
        } => format!(
            "round {round} still queued after {}: every `{}` executor is busy (queue wait, not a failed round)",
            seconds(*waited_ms),
            capability.as_str()
        ),
        E::DeadLetter { kind, reason } => format!(
            "dead letter: a {kind} message exhausted its deliveries ({}); the step is retried as an infrastructure failure",
            excerpt(reason, 160)
        ),
        other => other.kind().to_string(),
    }
}

#[cfg(test)]
#[path = "log_headline_tests.rs"]
mod tests;

/// `auditor audit-1 auditing: running check tests (2 of 3), 4.5 s elapsed`; the judge and the
/// rubric say so with the checks run.
fn audit_progress(
    worker: &str,
    stage: loopgate_protocol::wire::AuditStage,
    check: Option<&str>,
    (index, total): (u32, u32),
    elapsed_ms: u64,
) -> String {
    use loopgate_protocol::wire::AuditStage;
    let doing = match (stage, check) {
        (AuditStage::Checks, Some(check)) => format!("running check {check} ({index} of {total})"),
        (AuditStage::Checks, None) => format!("running checks ({total})"),
        (AuditStage::Judge, _) => format!("asking the judge ({index} of {total} checks run)"),
        (AuditStage::Rubric, _) => format!("scoring the rubric ({index} of {total} checks run)"),
    };
    format!(
        "auditor {worker} auditing: {doing}, {} elapsed",
        seconds(i64::try_from(elapsed_ms).unwrap_or(i64::MAX))
    )
}
