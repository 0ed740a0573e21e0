//! The ids messages are deduplicated by (`Nats-Msg-Id`): the dispatch id of every request the
//! manager publishes, which also names the step in cancellation notices and episode claims, and
//! the ids of the results, start notices and decision requests published on the results stream.
//! Every format lives here and nowhere else.
//!
//! **Results-stream ids are sealed.** JetStream deduplicates per stream, whatever the subject,
//! and every role may publish somewhere on `LG_RESULTS`: whoever can predict another role's
//! next id can publish junk under it first, and the honest message is then dropped as a
//! duplicate. So every id published there ends in a seal no other role can guess:
//! `{readable prefix}:{seal}` ([`sealed`]). A worker's seal is a random nonce made once per
//! result and stored with it in the episode claim, so a republished result keeps its id (the
//! worker runtime, `loopgate_transport::runtime::claimed_episode`); the manager's is derived
//! from a per-run secret in the run record (`loopgate_common::state::MsgIdSecret`), so a
//! replayed transition and the outbox relay publish the same id. A prefix scoped by role would
//! not help: a squatter writes any prefix it likes.
//!
//! The dispatch ids of work requests (`LG_EXEC`, `LG_AUDIT`) stay readable: only managers may
//! publish on those streams, and workers need them as claim keys and cancellation scopes.
//!
//! The prefix's marker (`exec-result`, `audit-report`, `decide`, ...) names the role that
//! publishes such ids ([`id_owner`]): the manager refuses, as a security event, a message whose
//! id has the shape of another role's than the one its subject belongs to.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::wire::AuditPurpose;

/// The step a message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepKey<'a> {
    pub run_id: &'a str,
    pub generation: u32,
    pub round: u32,
}

impl StepKey<'_> {
    /// `{run}:{generation}:{round}:exec-result:{attempt}`: the prefix of an exec result's id
    /// (the worker runtime seals it, see [`sealed`]).
    pub fn exec_result_msg_id(&self, attempt: u64) -> String {
        format!("{self}:{EXEC_RESULT}:{attempt}")
    }

    /// `{run}:{generation}:{round}:exec-started:{attempt}` (a prefix, sealed when published).
    pub fn exec_started_msg_id(&self, attempt: u64) -> String {
        format!("{self}:{EXEC_STARTED}:{attempt}")
    }

    /// `{run}:{generation}:{round}:exec-progress:{attempt}:{sibling}:{seq}`: a progress
    /// notice's id (the worker adds a random seal, see [`sealed`]).
    pub fn exec_progress_msg_id(&self, attempt: u64, sibling: u32, seq: u64) -> String {
        format!("{self}:{EXEC_PROGRESS}:{attempt}:{sibling}:{seq}")
    }

    /// `{run}:{generation}:{round}:audit-progress:{purpose}:{attempt}:{seq}`: an audit's progress
    /// notice's id (the worker adds a random seal, see [`sealed`]).
    pub fn audit_progress_msg_id(&self, purpose: AuditPurpose, attempt: u64, seq: u64) -> String {
        format!(
            "{self}:{AUDIT_PROGRESS}:{}:{attempt}:{seq}",
            purpose.as_str()
        )
    }

    /// `{run}:{generation}:{round}:audit-started:{purpose}:{attempt}` (a prefix, sealed when
    /// published).
    pub fn audit_started_msg_id(&self, purpose: AuditPurpose, attempt: u64) -> String {
        format!("{self}:{AUDIT_STARTED}:{}:{attempt}", purpose.as_str())
    }

    /// `{run}:{generation}:{round}:audit-report:{purpose}:{attempt}` (a prefix, sealed when
    /// published).
    pub fn audit_report_msg_id(&self, purpose: AuditPurpose, attempt: u64) -> String {
        format!("{self}:{AUDIT_REPORT}:{}:{attempt}", purpose.as_str())
    }
}

const EXEC_RESULT: &str = "exec-result";
const EXEC_STARTED: &str = "exec-started";
const EXEC_PROGRESS: &str = "exec-progress";
const AUDIT_REPORT: &str = "audit-report";
const AUDIT_STARTED: &str = "audit-started";
const AUDIT_PROGRESS: &str = "audit-progress";
const DECIDE: &str = "decide";

/// `{run}:{generation}:decide:{seq}`: the prefix of a decision request's id (the manager seals
/// it with the run's secret).
pub fn decide_msg_id(run_id: &str, generation: u32, seq: u32) -> String {
    format!("{run_id}:{generation}:{DECIDE}:{seq}")
}

/// `{prefix}:{seal}`: the id a results-stream message is published under. `seal` is what no
/// other role can guess (a worker's random nonce, the manager's keyed digest).
pub fn sealed(prefix: &str, seal: &str) -> String {
    format!("{prefix}:{seal}")
}

/// The role that publishes results-stream messages under ids of some shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdOwner {
    Manager,
    Executor,
    Auditor,
}

impl IdOwner {
    /// The stable name (log field and metric attribute).
    pub fn as_str(&self) -> &'static str {
        match self {
            IdOwner::Manager => "manager",
            IdOwner::Executor => "executor",
            IdOwner::Auditor => "auditor",
        }
    }
}

/// Whose id `msg_id` looks like: the role whose marker (`exec-result`, `exec-started`:
/// executors; `audit-report`, `audit-started`: auditors; `decide`: managers) is one of its
/// `:`-separated parts, wherever it stands and sealed or not (a squatter need not copy the
/// whole shape). `None` for an id with no marker, or with markers of two roles.
pub fn id_owner(msg_id: &str) -> Option<IdOwner> {
    let mut owner = None;
    for part in msg_id.split(':') {
        let this = match part {
            EXEC_RESULT | EXEC_STARTED | EXEC_PROGRESS => IdOwner::Executor,
            AUDIT_REPORT | AUDIT_STARTED | AUDIT_PROGRESS => IdOwner::Auditor,
            DECIDE => IdOwner::Manager,
            _ => continue,
        };
        match owner {
            None => owner = Some(this),
            Some(seen) if seen == this => {}
            Some(_) => return None,
        }
    }
    owner
}

impl fmt::Display for StepKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.run_id, self.generation, self.round)
    }
}

/// The id of one dispatched request: its `Nats-Msg-Id`, the key of its episode claim and what
/// a scoped cancellation names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DispatchId(String);

impl DispatchId {
    /// `{run}:{generation}:{round}:exec`.
    pub fn exec(step: StepKey<'_>) -> DispatchId {
        DispatchId(format!("{step}:exec"))
    }

    /// `{run}:{generation}:{round}:exec` for a step's first attempt (as [`DispatchId::exec`]),
    /// `{run}:{generation}:{round}:exec:attempt-{k}` for its sibling `k` (1-based).
    pub fn exec_attempt(step: StepKey<'_>, attempt: u32) -> DispatchId {
        match attempt {
            0 | 1 => DispatchId::exec(step),
            k => DispatchId(format!("{step}:exec:attempt-{k}")),
        }
    }

    /// `{run}:{generation}:{round}:audit:attempt-{k}`: the checks-only audit of sibling `k`'s
    /// candidate (the winner's full audit is the round's own, [`DispatchId::audit`]).
    pub fn attempt_audit(step: StepKey<'_>, attempt: u32) -> DispatchId {
        DispatchId(format!("{step}:audit:attempt-{attempt}"))
    }

    /// `{run}:{generation}:{round}:audit` for a round's (or a plan's) audit;
    /// `{run}:{generation}:{round}:final:{decide_seq}` for a final audit, which also names the
    /// decision it checks, so a retried `done` is a new request.
    pub fn audit(step: StepKey<'_>, purpose: AuditPurpose, decide_seq: u32) -> DispatchId {
        match purpose {
            AuditPurpose::Round | AuditPurpose::Plan => DispatchId(format!("{step}:audit")),
            AuditPurpose::Final => DispatchId(format!("{step}:final:{decide_seq}")),
        }
    }

    /// The id an audit request that arrived without its header goes by:
    /// `{run}:{generation}:{round}:audit:{purpose}` (the request does not carry the decision
    /// sequence a final audit's dispatch id names).
    pub fn audit_without_header(step: StepKey<'_>, purpose: AuditPurpose) -> DispatchId {
        DispatchId(format!("{step}:audit:{}", purpose.as_str()))
    }

    /// The id as it arrived in a message header.
    pub fn from_header(value: &str) -> DispatchId {
        DispatchId(value.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for DispatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEP: StepKey<'static> = StepKey {
        run_id: "r1",
        generation: 2,
        round: 3,
    };

    #[test]
    fn formats() {
        let cases: &[(String, &str)] = &[
            (DispatchId::exec(STEP).into_string(), "r1:2:3:exec"),
            (
                DispatchId::exec_attempt(STEP, 1).into_string(),
                "r1:2:3:exec",
            ),
            (
                DispatchId::exec_attempt(STEP, 3).into_string(),
                "r1:2:3:exec:attempt-3",
            ),
            (
                DispatchId::attempt_audit(STEP, 2).into_string(),
                "r1:2:3:audit:attempt-2",
            ),
            (
                DispatchId::audit(STEP, AuditPurpose::Round, 9).into_string(),
                "r1:2:3:audit",
            ),
            (
                DispatchId::audit(STEP, AuditPurpose::Plan, 9).into_string(),
                "r1:2:3:audit",
            ),
            (
                DispatchId::audit(STEP, AuditPurpose::Final, 9).into_string(),
                "r1:2:3:final:9",
            ),
            (
                DispatchId::audit_without_header(STEP, AuditPurpose::Final).into_string(),
                "r1:2:3:audit:final",
            ),
            (STEP.exec_result_msg_id(1), "r1:2:3:exec-result:1"),
            (STEP.exec_started_msg_id(2), "r1:2:3:exec-started:2"),
            (
                STEP.audit_started_msg_id(AuditPurpose::Round, 1),
                "r1:2:3:audit-started:round:1",
            ),
            (
                STEP.audit_report_msg_id(AuditPurpose::Final, 4),
                "r1:2:3:audit-report:final:4",
            ),
            (decide_msg_id("r1", 2, 7), "r1:2:decide:7"),
            (sealed("r1:2:decide:7", "abc"), "r1:2:decide:7:abc"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn owners_of_id_shapes() {
        let cases: &[(String, Option<IdOwner>)] = &[
            (STEP.exec_result_msg_id(1), Some(IdOwner::Executor)),
            (
                sealed(&STEP.exec_started_msg_id(1), "n0nce"),
                Some(IdOwner::Executor),
            ),
            (
                STEP.audit_report_msg_id(AuditPurpose::Round, 1),
                Some(IdOwner::Auditor),
            ),
            (
                sealed(&STEP.audit_started_msg_id(AuditPurpose::Final, 2), "n"),
                Some(IdOwner::Auditor),
            ),
            (decide_msg_id("r1", 1, 1), Some(IdOwner::Manager)),
            (
                sealed(&decide_msg_id("r1", 1, 1), "t"),
                Some(IdOwner::Manager),
            ),
            // A squatter need not copy the whole shape.
            ("x:audit-report".to_string(), Some(IdOwner::Auditor)),
            ("decide".to_string(), Some(IdOwner::Manager)),
            // No marker, or markers of two roles: nobody's.
            ("forged-report-0".to_string(), None),
            (DispatchId::exec(STEP).into_string(), None),
            ("r1:exec-result:audit-report".to_string(), None),
            ("r1:1:1:decided:1".to_string(), None),
        ];
        for (id, want) in cases {
            assert_eq!(id_owner(id), *want, "{id}");
        }
    }
}
