//! One transition in the making: the new record, its log entries, evidence and outbox.

mod dispatch;

use super::exec_feedback::exec_feedback;
use super::transition::{Decision, Step, DECISION_SLACK_SECS, FEEDBACK_KEEP, HISTORY_KEEP};
use crate::gate::{evaluate_gate, GateVerdict};
use crate::goal::words::clauses_for_step;
use crate::state::{
    Attempt, AttemptStage, Deadline, DeadlineKind, HeldStep, LogEntry, LogEvent, Outgoing, Phase,
    RoundSummary, RunRecord, RunState, Target,
};
use loopgate_protocol::dispatch_id::{decide_msg_id, DispatchId, StepKey};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::verdict::Evidence;
use loopgate_protocol::wire::{
    AuditPurpose, AuditReport, CancelEpisodes, DecideRequest, EpisodeKind, Increment, Message,
};

use crate::decide::dispatch_ids::single_episode_in_flight;

pub(super) struct Tx {
    pub record: RunRecord,
    pub log: Vec<LogEntry>,
    pub evidence: Vec<Evidence>,
    /// The audit report accepted by this transition (see [`Step::audit_report`]).
    pub audit_report: Option<AuditReport>,
    pub previous_state: RunState,
    pub now: i64,
    /// Whether an executor or auditor episode is still running for this run; cleared by the
    /// handler of its result.
    pub episode_in_flight: bool,
}

impl Tx {
    pub fn new(record: &RunRecord, now: i64) -> Tx {
        let mut record = record.clone();
        record.outbox.clear();
        record.updated_at = now;
        Tx {
            episode_in_flight: matches!(
                record.phase,
                Phase::Executing { .. } | Phase::Auditing { .. }
            ),
            previous_state: record.state,
            record,
            log: Vec::new(),
            evidence: Vec::new(),
            audit_report: None,
            now,
        }
    }

    pub fn log(&mut self, event: LogEvent) {
        self.log.push(LogEntry {
            at: self.now,
            generation: self.record.generation,
            round: self.record.round,
            event,
        });
    }

    pub fn publish(&mut self, target: Target, msg_id: String, message: Message) {
        self.record.outbox.push(Outgoing {
            target,
            msg_id,
            message,
        });
    }

    /// Keep a round's summary in the history the manager's prompt reads (the last few).
    pub fn push_history(&mut self, summary: RoundSummary) {
        self.record.history.push(summary);
        let excess = self.record.history.len().saturating_sub(HISTORY_KEEP);
        self.record.history.drain(..excess);
    }

    pub fn feedback(&mut self, line: String) {
        self.record.feedback.push(line);
        let excess = self.record.feedback.len().saturating_sub(FEEDBACK_KEEP);
        self.record.feedback.drain(..excess);
    }

    /// A new step goes out: no episode of it has started yet.
    fn new_step(&mut self) {
        self.record.deadlines.episode_started = None;
    }

    /// A worker has picked up the step: it no longer waits in the queue.
    pub fn picked_up(&mut self) {
        self.record.deadlines.queued_since_ms = None;
    }

    pub fn set_deadline(&mut self, kind: DeadlineKind, secs: u64) {
        let at_ms = self.now.saturating_add((secs as i64).saturating_mul(1000));
        self.record.deadlines.phase = Some(Deadline { at_ms, kind });
    }

    /// A paused run takes no new step: `step` waits in phase `paused` until unpause.
    fn hold(&mut self, step: HeldStep) -> bool {
        if self.record.state != RunState::Paused {
            return false;
        }
        self.record.deadlines.phase = None;
        self.log(LogEvent::Held {
            step: step.name().to_string(),
        });
        self.record.phase = Phase::Paused { held: step };
        true
    }

    /// Take the step a paused run held back (the run is no longer paused).
    pub fn take_held(&mut self, step: HeldStep) {
        match step {
            HeldStep::Decide => self.request_decision(),
            HeldStep::Exec {
                capability,
                increment,
                episode,
                feedback,
            } => self.dispatch_exec(capability, increment, episode, *feedback),
            HeldStep::Audit {
                purpose,
                candidate,
                objective,
                write_scope,
            } => self.dispatch_audit(purpose, candidate, objective, write_scope),
        }
    }

    /// A pause ends without unpause (the run asks a question or ends): the wall clock runs again.
    fn lift_pause(&mut self) {
        if let Some(hold) = self.record.steering.pause.take() {
            if let Some(left) = hold.wall_left_ms {
                self.record.deadlines.wall_ms = Some(self.now.saturating_add(left));
            }
        }
    }

    /// Ask the manager for the next step (with `budget.manager = false`, take the step it
    /// stands for: see [`Tx::go_on_without_manager`]).
    pub fn request_decision(&mut self) {
        if self.hold(HeldStep::Decide) {
            return;
        }
        if !self.record.task.budget.manager {
            self.go_on_without_manager();
            return;
        }
        self.record.decide_seq += 1;
        let seq = self.record.decide_seq;
        self.record.phase = Phase::Deciding { seq };
        let secs = self.record.task.budget.manager_episode_secs + DECISION_SLACK_SECS;
        self.set_deadline(DeadlineKind::Decision, secs);
        let r = &self.record;
        // Sealed with the run's secret: no worker can squat it on the results stream.
        let msg_id = r
            .msg_id_secret
            .seal(&decide_msg_id(&r.id, r.generation, seq));
        let message = Message::DecideRequest(DecideRequest {
            run_id: r.id.clone(),
            generation: r.generation,
            seq,
        });
        self.publish(Target::Decide, msg_id, message);
    }

    /// With the completion gate open on the artifact, dispatches the final audit and gives
    /// `None`; with it closed, gives the closed gate (its reasons) and dispatches nothing.
    pub(super) fn final_audit_if_gate_passes(&mut self) -> Option<GateVerdict> {
        let r = &self.record;
        let verdicts = r.audit.last_verdicts.as_ref().map(|(v, s)| (v, s.as_str()));
        let gate = evaluate_gate(&r.contract, verdicts, &r.audit.evidence, &r.snapshot);
        if !gate.passed {
            return Some(gate);
        }
        let snapshot = r.snapshot.clone();
        self.dispatch_audit(
            AuditPurpose::Final,
            snapshot,
            "final audit before completion".into(),
            Vec::new(),
        );
        None
    }

    /// `budget.manager = false`: no model decides. The final audit once the gate passes on the
    /// artifact, the end when the round budget is spent, else the goal itself as the next step.
    fn go_on_without_manager(&mut self) {
        if self.final_audit_if_gate_passes().is_none() {
            return;
        }
        let r = &self.record;
        let max = r.task.budget.max_rounds;
        if r.rounds_this_generation() >= max {
            self.terminal(
                RunState::BudgetExhausted,
                format!("max_rounds ({max}) reached without passing the gate"),
            );
            return;
        }
        if self.record.state == RunState::Queued {
            self.record.state = RunState::Running;
        }
        let goal = self.record.contract.goal.clone();
        let increment = Increment {
            objective: goal.clone(),
            instructions: goal.clone(),
            acceptance_checks: self
                .record
                .contract
                .criteria
                .iter()
                .map(|c| c.id.clone())
                .collect(),
            write_scope: Vec::new(),
            goal_clauses: clauses_for_step(&goal, &goal),
        };
        let feedback = exec_feedback(&self.record);
        self.dispatch_exec(Capability::Cli, increment, EpisodeKind::Step, feedback);
    }

    /// After a round that did not pass: ask the manager again, or a human once
    /// `max_failed_rounds` rounds in a row have failed.
    pub fn continue_after_failure(&mut self, why: &str) {
        if self.count_failure(why) {
            self.continue_work();
        }
    }

    /// Count a round (or planning attempt) that did not pass, escalating the executor ladder
    /// when due, and ask a human once `max_failed_rounds` of them have failed in a row.
    /// Returns whether the run goes on by itself (no human was asked).
    pub fn count_failure(&mut self, why: &str) -> bool {
        self.record.streaks.failed_rounds += 1;
        self.maybe_escalate();
        let max = self.record.task.budget.max_failed_rounds;
        if self.record.streaks.failed_rounds >= max {
            let what = match self.record.planning.stage {
                Some(stage) => format!(
                    "planning attempts ({}) in a row were rejected",
                    stage.as_str()
                ),
                None => "rounds in a row did not pass the gate".to_string(),
            };
            let question = format!(
                "{} {what} (last: {why}). Answer with guidance to continue (`loopgate answer`), \
                 or cancel the run.",
                self.record.streaks.failed_rounds
            );
            self.ask(question);
            false
        } else {
            true
        }
    }

    /// The next step after an interruption: the planning episode of the current stage while
    /// the contract is being planned, else a manager decision.
    pub fn continue_work(&mut self) {
        if self.record.planning.stage.is_some() {
            self.dispatch_planning();
        } else {
            self.request_decision();
        }
    }

    /// Stop every sibling of the step in flight that has not settled (its episode, or its
    /// checks-only audit), each by its own dispatch id, and mark it lost: another sibling won,
    /// or the step's deadline passed. Whatever they report later is ignored. With
    /// `keep_queued`, siblings no executor has started yet are left waiting.
    pub fn cancel_siblings(&mut self, reason: &str, keep_queued: bool) {
        let run_id = self.record.id.clone();
        let step = StepKey {
            run_id: &run_id,
            generation: self.record.generation,
            round: self.record.round,
        };
        let Phase::Executing { attempts, .. } = &mut self.record.phase else {
            return;
        };
        let mut dispatches = Vec::new();
        let keep = |a: &Attempt| keep_queued && a.stage == AttemptStage::Queued;
        for a in attempts.iter_mut().filter(|a| !a.is_settled() && !keep(a)) {
            let dispatch = match a.stage {
                AttemptStage::Auditing => DispatchId::attempt_audit(step, a.index),
                _ => DispatchId::exec_attempt(step, a.index),
            };
            dispatches.push(dispatch.into_string());
            a.stage = AttemptStage::Lost;
        }
        let in_flight = self.episode_in_flight;
        for dispatch in dispatches {
            self.publish_cancel(format!("{dispatch}:cancel"), reason, Some(dispatch));
        }
        // Cancelling some siblings leaves the step itself in flight.
        self.episode_in_flight = in_flight;
    }

    /// Cost-aware escalation: every `escalate_after` failed rounds in a row, move the executor
    /// one rung up its profile ladder (if there is one).
    fn maybe_escalate(&mut self) {
        let r = &self.record;
        let every = r.task.budget.escalate_after.max(1);
        let rungs = r.task.roles.executor_escalation.len() as u32;
        if r.streaks.failed_rounds.is_multiple_of(every) && r.escalation_level < rungs {
            self.record.escalation_level += 1;
            let profile = self.record.executor_profile().to_string();
            let after_failed_rounds = self.record.streaks.failed_rounds;
            self.feedback(format!(
                "After {after_failed_rounds} failed rounds the executor was escalated to profile '{profile}'."
            ));
            self.log(LogEvent::Escalated {
                profile,
                after_failed_rounds,
            });
        }
    }

    pub fn ask(&mut self, question: String) {
        self.lift_pause();
        self.record.state = RunState::WaitingForInput;
        self.record.phase = Phase::WaitingForAnswer {
            question: question.clone(),
        };
        self.record.deadlines.phase = None;
        self.log(LogEvent::Question { question });
    }

    /// Tell in-flight episodes of this run (this generation or older) to stop.
    pub fn cancel_episodes(&mut self, reason: &str) {
        let r = &self.record;
        let msg_id = format!("{}:{}:cancel:{}", r.id, r.generation, r.round);
        self.publish_cancel(msg_id, reason, None);
    }

    /// Tell the episode of the step in flight, and only it, to stop (its deadline passed):
    /// the run's later steps in this generation are not touched.
    pub fn cancel_step(&mut self, reason: &str) {
        if matches!(&self.record.phase, Phase::Executing { attempts, .. } if !attempts.is_empty()) {
            self.cancel_siblings(reason, false);
            self.episode_in_flight = false;
            return;
        }
        match single_episode_in_flight(&self.record) {
            Some((_, dispatch)) => {
                self.publish_cancel(format!("{dispatch}:cancel"), reason, Some(dispatch))
            }
            None => self.cancel_episodes(reason),
        }
    }

    fn publish_cancel(&mut self, msg_id: String, reason: &str, dispatch: Option<String>) {
        self.episode_in_flight = false;
        let message = Message::CancelEpisodes(CancelEpisodes {
            run_id: self.record.id.clone(),
            generation: self.record.generation,
            reason: reason.to_string(),
            dispatch,
        });
        self.publish(Target::Control, msg_id, message);
    }

    pub fn terminal(&mut self, state: RunState, reason: String) {
        if self.episode_in_flight {
            self.cancel_episodes(&reason);
        }
        self.lift_pause();
        self.record.state = state;
        self.record.phase = Phase::Finished;
        self.record.deadlines.phase = None;
        self.record.terminal_reason = Some(reason.clone());
        let snapshot = self.record.snapshot.clone();
        self.log(LogEvent::Terminal {
            state,
            reason,
            snapshot,
        });
    }

    /// Ends the run when the token or cost budget is spent. Returns true if it did.
    pub fn check_spend_budget(&mut self) -> bool {
        match self.spend_budget_spent() {
            Some(reason) => {
                self.terminal(RunState::BudgetExhausted, reason);
                true
            }
            None => false,
        }
    }

    /// Why the token or cost budget is spent, if it is.
    pub(super) fn spend_budget_spent(&self) -> Option<String> {
        let budget = &self.record.task.budget;
        let usage = &self.record.accounting.usage;
        let used_tokens = usage.total();
        let used_micros =
            usage.manager.cost_micros + usage.executor.cost_micros + usage.auditor.cost_micros;
        match (budget.max_total_tokens, budget.max_cost_micros) {
            (Some(max), _) if used_tokens > max => Some(format!(
                "token budget exhausted: {used_tokens} of {max} tokens used"
            )),
            (_, Some(max)) if used_micros > max => Some(format!(
                "cost budget exhausted: ${:.4} of ${:.4} spent",
                used_micros as f64 / 1e6,
                max as f64 / 1e6
            )),
            _ => None,
        }
    }

    pub fn into_step(self) -> Step {
        Step {
            record: self.record,
            log: self.log,
            evidence: self.evidence,
            audit_report: self.audit_report,
            previous_state: self.previous_state,
        }
    }

    pub fn finish(self) -> Decision {
        Decision::Apply(Box::new(self.into_step()))
    }
}
