//! A transition's dispatches: a round's executor episode (or its sibling attempts) and the
//! audits of a candidate, each with its dedup id.

use super::Tx;
use crate::decide::dispatch_ids::{audit_dispatch_id, step_key};
use crate::state::{Attempt, DeadlineKind, HeldStep, LogEvent, Phase, RunState, Target};
use loopgate_protocol::dispatch_id::DispatchId;
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::wire::{
    AuditPurpose, AuditRequest, EpisodeKind, ExecFeedback, ExecRequest, Increment, Message,
    FIRST_ATTEMPT,
};

impl Tx {
    /// Dispatch a round from the current snapshot: one executor episode, or for a step with
    /// `budget.attempts = N > 1` N sibling episodes (planning episodes run once), each its own
    /// request and dispatch id (the first keeps the id of a step of one episode).
    pub fn dispatch_exec(
        &mut self,
        capability: Capability,
        increment: Increment,
        episode: EpisodeKind,
        feedback: ExecFeedback,
    ) {
        if self.record.state == RunState::Paused {
            self.hold(HeldStep::Exec {
                capability,
                increment,
                episode,
                feedback: Box::new(feedback),
            });
            return;
        }
        self.record.round += 1;
        self.new_step();
        let start_secs = self.record.task.budget.start_secs;
        self.set_deadline(DeadlineKind::ExecStart, start_secs);
        self.record.deadlines.queued_since_ms = Some(self.now);
        // No start-by time for the worker: the start budget moves on while the step waits
        // behind busy executors (`LogEvent::QueueWait`), so a fixed time would drop a step the
        // manager still waits for. Workers still honour one that is set.
        let start_by_ms = None;
        let r = &self.record;
        let siblings = match episode {
            EpisodeKind::Step => r.task.budget.attempts.max(1),
            EpisodeKind::Plan | EpisodeKind::Propose => 1,
        };
        let request = ExecRequest {
            run_id: r.id.clone(),
            generation: r.generation,
            round: r.round,
            capability,
            contract: r.contract.clone(),
            increment: increment.clone(),
            base_snapshot: r.snapshot.clone(),
            executor_profile: r.executor_profile().to_string(),
            episode_secs: r.task.budget.executor_episode_secs,
            max_steps: r.task.budget.max_steps,
            start_by_ms,
            ignore: r.task.ignore.clone(),
            episode,
            feedback,
            self_checks: r.task.budget.self_checks,
            gui: r.task.gui.clone(),
            max_tokens: episode_tokens(r, siblings),
            attempt: FIRST_ATTEMPT,
        };
        let requests: Vec<(String, ExecRequest)> = (FIRST_ATTEMPT..=siblings)
            .map(|attempt| {
                let msg_id = DispatchId::exec_attempt(step_key(r), attempt).into_string();
                (
                    msg_id,
                    ExecRequest {
                        attempt,
                        ..request.clone()
                    },
                )
            })
            .collect();
        let base_snapshot = r.snapshot.clone();
        self.record.phase = Phase::Executing {
            round: self.record.round,
            capability,
            increment: increment.clone(),
            attempts: if siblings > 1 {
                (FIRST_ATTEMPT..=siblings).map(Attempt::queued).collect()
            } else {
                Vec::new()
            },
        };
        for (msg_id, request) in requests {
            self.publish(
                Target::Exec { capability },
                msg_id,
                Message::ExecRequest(request),
            );
        }
        self.log(LogEvent::ExecDispatched {
            capability,
            objective: increment.objective,
            base_snapshot,
            attempts: (siblings > 1).then_some(siblings),
        });
    }

    pub fn dispatch_audit(
        &mut self,
        purpose: AuditPurpose,
        candidate: String,
        objective: String,
        write_scope: Vec<String>,
    ) {
        self.dispatch_audit_of(purpose, candidate, objective, write_scope, false);
    }

    /// A checks-only round audit of `candidate` (no model asked, never completing the run):
    /// the spend budget ran out with the episode that froze it, and its audit decides whether
    /// the run ends holding it or the artifact before.
    pub(in crate::decide) fn dispatch_closing_audit(
        &mut self,
        candidate: String,
        objective: String,
        write_scope: Vec<String>,
    ) {
        self.dispatch_audit_of(AuditPurpose::Round, candidate, objective, write_scope, true);
    }

    /// A checks-only audit of the current snapshot before round 1, for `objective` (the
    /// starting workspace's checks: see `baseline`).
    pub(in crate::decide) fn dispatch_start_audit(&mut self, objective: String) {
        let base = self.record.snapshot.clone();
        self.dispatch_audit_of(AuditPurpose::Round, base, objective, Vec::new(), true);
    }

    fn dispatch_audit_of(
        &mut self,
        purpose: AuditPurpose,
        candidate: String,
        objective: String,
        write_scope: Vec<String>,
        checks_only: bool,
    ) {
        // A round's own audit finishes with its round; a final audit is a new step.
        if purpose == AuditPurpose::Final && self.record.state == RunState::Paused {
            self.hold(HeldStep::Audit {
                purpose,
                candidate,
                objective,
                write_scope,
            });
            return;
        }
        self.new_step();
        let r = &self.record;
        let base_snapshot = match purpose {
            AuditPurpose::Round | AuditPurpose::Plan => r.snapshot.clone(),
            AuditPurpose::Final => r.base_snapshot.clone(),
        };
        let msg_id = audit_dispatch_id(r, purpose);
        let request = AuditRequest {
            mechanical_only: checks_only,
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
            gui: r.task.gui.clone(),
            // What `go_on_after_audit` completes the run on, signed by the auditor.
            completes_run: !checks_only
                && (purpose == AuditPurpose::Final
                    || (purpose == AuditPurpose::Round && r.task.complete_on_gate)),
            unquoted_met: !r.task.judge_quotes,
        };
        let secs = r.task.budget.start_secs + r.task.budget.auditor_episode_secs;
        self.record.phase = Phase::Auditing {
            round: r.round,
            purpose,
            candidate: candidate.clone(),
            objective,
            write_scope,
            checks_only,
        };
        self.set_deadline(DeadlineKind::Audit, secs);
        self.publish(Target::Audit, msg_id, Message::AuditRequest(request));
        // Round 0's checks-only audit is the baseline's (see `baseline::is_pending`).
        let baseline = checks_only && purpose == AuditPurpose::Round && self.record.round == 0;
        self.log(LogEvent::AuditDispatched {
            purpose,
            candidate,
            checks_only,
            baseline,
        });
    }
}

/// What each of a step's `siblings` episodes may spend: an equal share of what is left of the
/// run's `max_total_tokens` (at least one token: an episode dispatched with the budget spent
/// still ends after its first turn); `None` without a token budget.
fn episode_tokens(r: &crate::state::RunRecord, siblings: u32) -> Option<u64> {
    let max = r.task.budget.max_total_tokens?;
    let left = max.saturating_sub(r.accounting.usage.total());
    Some((left / u64::from(siblings.max(1))).max(1))
}
