//! The run state machine: `decide(record, event) -> Decision`, pure. The manager loads the
//! record, decides, stores the new record with compare-and-set, then publishes the outbox.

use crate::contract::Contract;
use crate::gate::evaluate_gate;
use crate::next_step::{parse_next_step, Route};
use crate::state::{
    LogEntry, LogEvent, Outgoing, Phase, RoundSummary, RunRecord, RunState, Target,
};
use crate::subjects::Capability;
use crate::task::Task;
use crate::usage::Usage;
use crate::verdict::{AuditStatus, CheckVerdict, ContractVerdict, Evidence};
use crate::wire::{
    AuditPurpose, AuditReport, AuditRequest, DecideRequest, ExecOutcome, ExecRequest, ExecResult,
    Increment, Message,
};

/// Rounds kept in the record for the manager's prompt.
pub const HISTORY_KEEP: usize = 5;
/// Feedback lines kept for the next manager prompt.
pub const FEEDBACK_KEEP: usize = 6;
/// Raw manager output kept in the log for an invalid reply.
pub const RAW_LOG_CHARS: usize = 4000;

#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    ManagerReplied {
        generation: u32,
        seq: u32,
        raw: String,
        usage: Usage,
    },
    ManagerFailed {
        generation: u32,
        seq: u32,
        error: String,
        usage: Usage,
    },
    ExecFinished(ExecResult),
    AuditFinished(AuditReport),
    Answer { text: String },
    Cancel { reason: String },
}

impl RunEvent {
    /// Identity of the event, to recognise a redelivery of the last applied one.
    pub fn key(&self) -> String {
        match self {
            RunEvent::ManagerReplied { generation, seq, .. }
            | RunEvent::ManagerFailed { generation, seq, .. } => format!("decide:{generation}:{seq}"),
            RunEvent::ExecFinished(r) => format!("exec:{}:{}", r.generation, r.round),
            RunEvent::AuditFinished(r) => {
                format!("audit:{}:{}:{:?}:{}", r.generation, r.round, r.purpose, r.snapshot)
            }
            RunEvent::Answer { .. } => "answer".to_string(),
            RunEvent::Cancel { .. } => "cancel".to_string(),
        }
    }
}

/// The result of a transition, to be stored atomically.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub record: RunRecord,
    pub log: Vec<LogEntry>,
    /// New evidence records for the run's evidence history.
    pub evidence: Vec<Evidence>,
    pub previous_state: RunState,
}

impl Step {
    pub fn outgoing(&self) -> &[Outgoing] {
        &self.record.outbox
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Apply(Box<Step>),
    /// The event was already applied: publish the stored outbox again (dedup ids make it safe).
    Replay(Vec<Outgoing>),
    /// Stale or irrelevant; acknowledge and drop.
    Ignore(String),
}

struct Tx {
    record: RunRecord,
    log: Vec<LogEntry>,
    evidence: Vec<Evidence>,
    previous_state: RunState,
    now: i64,
}

impl Tx {
    fn new(record: &RunRecord, now: i64) -> Tx {
        let mut record = record.clone();
        record.outbox.clear();
        record.updated_at = now;
        Tx {
            previous_state: record.state,
            record,
            log: Vec::new(),
            evidence: Vec::new(),
            now,
        }
    }

    fn log(&mut self, event: LogEvent) {
        self.log.push(LogEntry {
            at: self.now,
            generation: self.record.generation,
            round: self.record.round,
            event,
        });
    }

    fn publish(&mut self, target: Target, msg_id: String, message: Message) {
        self.record.outbox.push(Outgoing {
            target,
            msg_id,
            message,
        });
    }

    fn feedback(&mut self, line: String) {
        self.record.feedback.push(line);
        let excess = self.record.feedback.len().saturating_sub(FEEDBACK_KEEP);
        self.record.feedback.drain(..excess);
    }

    fn request_decision(&mut self) {
        self.record.decide_seq += 1;
        let seq = self.record.decide_seq;
        self.record.phase = Phase::Deciding { seq };
        let r = &self.record;
        let msg_id = format!("{}:{}:decide:{}", r.id, r.generation, seq);
        let message = Message::DecideRequest(DecideRequest {
            run_id: r.id.clone(),
            generation: r.generation,
            seq,
        });
        self.publish(Target::Decide, msg_id, message);
    }

    fn terminal(&mut self, state: RunState, reason: String) {
        self.record.state = state;
        self.record.phase = Phase::Finished;
        self.record.terminal_reason = Some(reason.clone());
        let snapshot = self.record.snapshot.clone();
        self.log(LogEvent::Terminal {
            state,
            reason,
            snapshot,
        });
    }

    /// Ends the run when the token budget is spent. Returns true if it did.
    fn check_token_budget(&mut self) -> bool {
        if let Some(max) = self.record.task.budget.max_total_tokens {
            let used = self.record.usage.total();
            if used > max {
                self.terminal(
                    RunState::BudgetExhausted,
                    format!("token budget exhausted: {used} of {max} tokens used"),
                );
                return true;
            }
        }
        false
    }

    fn dispatch_audit(&mut self, purpose: AuditPurpose, candidate: String, objective: String, write_scope: Vec<String>) {
        let r = &self.record;
        let base_snapshot = match purpose {
            AuditPurpose::Round => r.snapshot.clone(),
            AuditPurpose::Final => r.base_snapshot.clone(),
        };
        let msg_id = match purpose {
            AuditPurpose::Round => format!("{}:{}:{}:audit", r.id, r.generation, r.round),
            AuditPurpose::Final => format!("{}:{}:{}:final:{}", r.id, r.generation, r.round, r.decide_seq),
        };
        let request = AuditRequest {
            run_id: r.id.clone(),
            generation: r.generation,
            round: r.round,
            purpose,
            contract: r.contract.clone(),
            objective: objective.clone(),
            write_scope: write_scope.clone(),
            base_snapshot,
            candidate_snapshot: candidate.clone(),
            auditor_profile: r.task.roles.auditor.clone(),
            episode_secs: r.task.budget.auditor_episode_secs,
        };
        self.record.phase = Phase::Auditing {
            round: r.round,
            purpose,
            candidate: candidate.clone(),
            objective,
            write_scope,
        };
        self.publish(Target::Audit, msg_id, Message::AuditRequest(request));
        self.log(LogEvent::AuditDispatched { purpose, candidate });
    }

    fn finish(self) -> Decision {
        Decision::Apply(Box::new(Step {
            record: self.record,
            log: self.log,
            evidence: self.evidence,
            previous_state: self.previous_state,
        }))
    }
}

/// Create the record of a new run and request its first decision.
pub fn start_run(id: &str, task: Task, base_snapshot: &str, now: i64) -> Step {
    let contract = Contract::from_task(&task);
    let record = RunRecord {
        id: id.to_string(),
        generation: 1,
        state: RunState::Queued,
        phase: Phase::Deciding { seq: 0 },
        contract,
        task,
        round: 0,
        base_snapshot: base_snapshot.to_string(),
        snapshot: base_snapshot.to_string(),
        task_state: None,
        history: Vec::new(),
        feedback: Vec::new(),
        invalid_streak: 0,
        decide_seq: 0,
        usage: Default::default(),
        created_at: now,
        updated_at: now,
        terminal_reason: None,
        evidence: Vec::new(),
        last_verdicts: None,
        last_gate: None,
        outbox: Vec::new(),
        last_event: None,
    };
    let mut tx = Tx::new(&record, now);
    tx.log(LogEvent::Submitted {
        spec_hash: record.contract.spec_hash.clone(),
        base_snapshot: base_snapshot.to_string(),
        criteria: record.contract.criteria.len() as u32,
    });
    tx.request_decision();
    Step {
        record: tx.record,
        log: tx.log,
        evidence: Vec::new(),
        previous_state: RunState::Queued,
    }
}

pub fn decide(record: &RunRecord, event: &RunEvent, now: i64) -> Decision {
    if record.last_event.as_deref() == Some(event.key().as_str()) {
        return Decision::Replay(record.outbox.clone());
    }
    let decision = match event {
        RunEvent::Cancel { reason } => on_cancel(record, reason, now),
        _ if record.state.is_terminal() => {
            Decision::Ignore(format!("run is {}", record.state.as_str()))
        }
        RunEvent::ManagerReplied { generation, seq, raw, usage } => {
            on_manager_reply(record, *generation, *seq, raw, *usage, now)
        }
        RunEvent::ManagerFailed { generation, seq, error, usage } => {
            on_manager_failed(record, *generation, *seq, error, *usage, now)
        }
        RunEvent::ExecFinished(result) => on_exec(record, result, now),
        RunEvent::AuditFinished(report) => on_audit(record, report, now),
        RunEvent::Answer { text } => on_answer(record, text, now),
    };
    match decision {
        Decision::Apply(mut step) => {
            step.record.last_event = Some(event.key());
            Decision::Apply(step)
        }
        other => other,
    }
}

fn expecting_decision(record: &RunRecord, generation: u32, seq: u32) -> Result<(), String> {
    if generation != record.generation {
        return Err(format!("stale generation {generation} (run is at {})", record.generation));
    }
    match record.phase {
        Phase::Deciding { seq: want } if want == seq => Ok(()),
        _ => Err(format!("no decision {seq} is pending")),
    }
}

fn on_cancel(record: &RunRecord, reason: &str, now: i64) -> Decision {
    if record.state.is_terminal() {
        return Decision::Ignore(format!("run is already {}", record.state.as_str()));
    }
    let mut tx = Tx::new(record, now);
    tx.terminal(RunState::Cancelled, reason.to_string());
    tx.finish()
}

fn on_answer(record: &RunRecord, text: &str, now: i64) -> Decision {
    if !matches!(record.phase, Phase::WaitingForAnswer { .. }) {
        return Decision::Ignore("the run is not waiting for input".to_string());
    }
    let mut tx = Tx::new(record, now);
    tx.record.state = RunState::Running;
    tx.feedback(format!("A human answered your question: {text}"));
    tx.request_decision();
    tx.finish()
}

fn on_manager_failed(record: &RunRecord, generation: u32, seq: u32, error: &str, usage: Usage, now: i64) -> Decision {
    if let Err(why) = expecting_decision(record, generation, seq) {
        return Decision::Ignore(why);
    }
    let mut tx = Tx::new(record, now);
    tx.record.usage.manager.add(usage);
    tx.record.invalid_streak += 1;
    tx.log(LogEvent::ManagerError {
        seq,
        error: error.to_string(),
    });
    if tx.record.invalid_streak > tx.record.task.budget.max_invalid_outputs {
        tx.terminal(
            RunState::Failed,
            format!("the manager model failed {} times in a row; last error: {error}", tx.record.invalid_streak),
        );
    } else if !tx.check_token_budget() {
        tx.request_decision();
    }
    tx.finish()
}

fn on_manager_reply(record: &RunRecord, generation: u32, seq: u32, raw: &str, usage: Usage, now: i64) -> Decision {
    if let Err(why) = expecting_decision(record, generation, seq) {
        return Decision::Ignore(why);
    }
    let mut tx = Tx::new(record, now);
    tx.record.usage.manager.add(usage);
    if tx.record.state == RunState::Queued {
        tx.record.state = RunState::Running;
    }
    if tx.check_token_budget() {
        return tx.finish();
    }
    let parsed = parse_next_step(raw).and_then(|step| match step.route {
        Route::Invalid => Err(crate::next_step::NextStepError::UnknownRoute {
            word: format!("invalid ({})", step.task),
        }),
        _ => Ok(step),
    });
    let step = match parsed {
        Ok(step) => step,
        Err(error) => {
            tx.record.invalid_streak += 1;
            tx.log(LogEvent::InvalidOutput {
                seq,
                error: error.to_string(),
                raw: raw.chars().take(RAW_LOG_CHARS).collect(),
            });
            if tx.record.invalid_streak > tx.record.task.budget.max_invalid_outputs {
                tx.terminal(
                    RunState::Blocked,
                    format!(
                        "the manager's reply could not be parsed {} times in a row; last error: {error}",
                        tx.record.invalid_streak
                    ),
                );
            } else {
                tx.feedback(format!(
                    "Your previous reply could not be used: {error}. Answer with the three lines \
                     `Current task state:`, `Next:` and `Task:` exactly as described."
                ));
                tx.request_decision();
            }
            return tx.finish();
        }
    };
    tx.record.invalid_streak = 0;
    if step.task_state.is_some() {
        tx.record.task_state = step.task_state.clone();
    }
    tx.log(LogEvent::Decision {
        seq,
        route: step.route,
        task: step.task.clone(),
        task_state: step.task_state.clone(),
    });
    match step.route {
        Route::Cli | Route::Gui => {
            let budget = &tx.record.task.budget;
            if tx.record.round >= budget.max_rounds {
                let max = budget.max_rounds;
                tx.terminal(
                    RunState::BudgetExhausted,
                    format!("max_rounds ({max}) reached without passing the gate"),
                );
                return tx.finish();
            }
            let capability = if step.route == Route::Gui { Capability::Gui } else { Capability::Cli };
            dispatch_exec(&mut tx, capability, step.task);
        }
        Route::Done => {
            let r = &tx.record;
            let verdicts = r.last_verdicts.as_ref().map(|(v, s)| (v, s.as_str()));
            let gate = evaluate_gate(&r.contract, verdicts, &r.evidence, &r.snapshot);
            if gate.passed {
                let snapshot = r.snapshot.clone();
                tx.dispatch_audit(AuditPurpose::Final, snapshot, "final audit before completion".into(), Vec::new());
            } else {
                tx.log(LogEvent::DoneRefused {
                    reasons: gate.reasons.clone(),
                });
                tx.feedback(format!(
                    "`done` was refused: the completion gate is closed because {}. Choose a step that fixes this.",
                    gate.reasons.join("; ")
                ));
                tx.request_decision();
            }
        }
        Route::Blocked => {
            let reason = if step.task.is_empty() {
                "the manager declared the task blocked".to_string()
            } else {
                format!("the manager declared the task blocked: {}", step.task)
            };
            tx.terminal(RunState::Blocked, reason);
        }
        Route::Ask => {
            tx.record.state = RunState::WaitingForInput;
            tx.record.phase = Phase::WaitingForAnswer {
                question: step.task.clone(),
            };
            tx.log(LogEvent::Question { question: step.task });
        }
        Route::Invalid => {}
    }
    tx.finish()
}

fn dispatch_exec(tx: &mut Tx, capability: Capability, task: String) {
    tx.record.round += 1;
    let r = &tx.record;
    let increment = Increment {
        objective: task.clone(),
        instructions: task,
        acceptance_checks: r.contract.criteria.iter().map(|c| c.id.clone()).collect(),
        write_scope: Vec::new(),
    };
    let request = ExecRequest {
        run_id: r.id.clone(),
        generation: r.generation,
        round: r.round,
        capability,
        contract: r.contract.clone(),
        increment: increment.clone(),
        base_snapshot: r.snapshot.clone(),
        executor_profile: r.task.roles.executor.clone(),
        episode_secs: r.task.budget.executor_episode_secs,
        max_steps: r.task.budget.max_steps,
    };
    let msg_id = format!("{}:{}:{}:exec", r.id, r.generation, r.round);
    tx.record.phase = Phase::Executing {
        round: r.round,
        capability,
        increment: increment.clone(),
    };
    tx.publish(Target::Exec { capability }, msg_id, Message::ExecRequest(request));
    tx.log(LogEvent::ExecDispatched {
        capability,
        objective: increment.objective,
    });
}

fn push_history(tx: &mut Tx, summary: RoundSummary) {
    tx.record.history.push(summary);
    let excess = tx.record.history.len().saturating_sub(HISTORY_KEEP);
    tx.record.history.drain(..excess);
}

fn on_exec(record: &RunRecord, result: &ExecResult, now: i64) -> Decision {
    if result.generation != record.generation {
        return Decision::Ignore(format!("stale generation {}", result.generation));
    }
    let increment = match &record.phase {
        Phase::Executing { round, increment, .. } if *round == result.round => increment.clone(),
        _ => return Decision::Ignore(format!("no executor result for round {} is pending", result.round)),
    };
    let mut tx = Tx::new(record, now);
    tx.record.usage.executor.add(result.usage);
    let (candidate, summary, claimed_done, tool_calls, error) = match &result.outcome {
        ExecOutcome::Frozen { candidate, summary, claimed_done, tool_calls, .. } => {
            (Some(candidate.clone()), summary.clone(), *claimed_done, *tool_calls, None)
        }
        ExecOutcome::Failed { error } => (None, String::new(), false, 0, Some(error.clone())),
    };
    tx.log(LogEvent::ExecResult {
        worker: result.worker.clone(),
        candidate: candidate.clone(),
        summary: summary.clone(),
        claimed_done,
        tool_calls,
        error: error.clone(),
    });
    push_history(
        &mut tx,
        RoundSummary {
            round: result.round,
            objective: increment.objective.clone(),
            exec_summary: error.clone().map(|e| format!("executor failed: {e}")).unwrap_or(summary),
            candidate: candidate.clone(),
            verdicts: None,
            gaps: Vec::new(),
            failing: Vec::new(),
            passing: Vec::new(),
        },
    );
    if tx.check_token_budget() {
        return tx.finish();
    }
    match candidate {
        Some(candidate) => tx.dispatch_audit(AuditPurpose::Round, candidate, increment.objective, increment.write_scope),
        None => {
            tx.feedback(format!(
                "Round {}: the executor could not finish the step: {}",
                result.round,
                error.unwrap_or_default()
            ));
            tx.request_decision();
        }
    }
    tx.finish()
}

/// The acceptance-constraint guard: a report that says complete while a blocking criterion has
/// no passing evidence on its snapshot is downgraded to incomplete/unknown.
pub fn guard_report(contract: &Contract, report: &AuditReport) -> (crate::verdict::Verdicts, bool) {
    let mut verdicts = report.verdicts;
    if verdicts.status != AuditStatus::Complete {
        return (verdicts, false);
    }
    let unmet = contract.blocking().any(|c| {
        !report
            .evidence
            .iter()
            .any(|e| e.check_id == c.id && e.artifact_version == report.snapshot && e.verdict == CheckVerdict::Pass)
    });
    if unmet {
        verdicts.status = AuditStatus::Incomplete;
        verdicts.contract = ContractVerdict::Unknown;
    }
    (verdicts, unmet)
}

fn on_audit(record: &RunRecord, report: &AuditReport, now: i64) -> Decision {
    if report.generation != record.generation {
        return Decision::Ignore(format!("stale generation {}", report.generation));
    }
    let (purpose, candidate) = match &record.phase {
        Phase::Auditing { round, purpose, candidate, .. }
            if *round == report.round && *purpose == report.purpose && *candidate == report.snapshot =>
        {
            (*purpose, candidate.clone())
        }
        _ => return Decision::Ignore(format!("no audit of round {} is pending", report.round)),
    };
    let mut tx = Tx::new(record, now);
    tx.record.usage.auditor.add(report.usage);
    let (verdicts, downgraded) = guard_report(&record.contract, report);
    // Only evidence bound to the audited snapshot counts.
    let evidence: Vec<Evidence> = report
        .evidence
        .iter()
        .filter(|e| e.artifact_version == candidate)
        .cloned()
        .collect();
    tx.evidence = evidence.clone();
    if verdicts.integrity == crate::verdict::Integrity::Violation {
        let reason = format!("integrity violation: {}", report.gaps.join("; "));
        tx.log(LogEvent::CandidateRejected {
            candidate: candidate.clone(),
            reason: reason.clone(),
        });
        tx.feedback(format!(
            "Round {}: the candidate was rejected ({reason}); the workspace stays at the previous snapshot.",
            report.round
        ));
    } else {
        tx.record.snapshot = candidate.clone();
        tx.record.evidence = evidence.clone();
    }
    tx.record.last_verdicts = Some((verdicts, candidate.clone()));
    let r = &tx.record;
    let gate = evaluate_gate(
        &r.contract,
        r.last_verdicts.as_ref().map(|(v, s)| (v, s.as_str())),
        &r.evidence,
        &r.snapshot,
    );
    tx.log(LogEvent::AuditReport {
        purpose,
        worker: report.worker.clone(),
        snapshot: candidate.clone(),
        verdicts,
        passing: gate.passing,
        checked: gate.checked,
        gaps: report.gaps.clone(),
        downgraded,
    });
    tx.log(LogEvent::Gate {
        passed: gate.passed,
        snapshot: gate.snapshot.clone(),
        reasons: gate.reasons.clone(),
    });
    if let Some(last) = tx.record.history.last_mut().filter(|h| h.round == report.round) {
        last.verdicts = Some(verdicts);
        last.gaps = report.gaps.clone();
        last.failing = evidence
            .iter()
            .filter(|e| e.verdict != CheckVerdict::Pass)
            .map(|e| (e.check_id.clone(), e.output_excerpt.clone()))
            .collect();
        last.passing = evidence
            .iter()
            .filter(|e| e.verdict == CheckVerdict::Pass)
            .map(|e| e.check_id.clone())
            .collect();
    }
    let passed = gate.passed;
    let reasons = gate.reasons.join("; ");
    tx.record.last_gate = Some(gate);
    if tx.check_token_budget() {
        return tx.finish();
    }
    match (purpose, passed) {
        (AuditPurpose::Final, true) => {
            tx.terminal(RunState::Completed, "the final audit passed the gate".to_string())
        }
        (AuditPurpose::Round, true) if tx.record.task.complete_on_gate => tx.terminal(
            RunState::Completed,
            "an audit of the current snapshot passed the gate on every criterion".to_string(),
        ),
        (AuditPurpose::Final, false) => {
            tx.feedback(format!("The final audit did not pass the gate: {reasons}"));
            tx.request_decision();
        }
        (AuditPurpose::Round, _) => tx.request_decision(),
    }
    tx.finish()
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
