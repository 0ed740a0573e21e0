//! The ids messages are deduplicated by (`Nats-Msg-Id`): the dispatch id of every request the
//! manager publishes, which also names the step in cancellation notices and episode claims, and
//! the ids of the results and start notices the workers publish about it. Every format lives
//! here and nowhere else.

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
    /// `{run}:{generation}:{round}:exec-result:{attempt}`.
    pub fn exec_result_msg_id(&self, attempt: u64) -> String {
        format!("{self}:exec-result:{attempt}")
    }

    /// `{run}:{generation}:{round}:exec-started:{attempt}`.
    pub fn exec_started_msg_id(&self, attempt: u64) -> String {
        format!("{self}:exec-started:{attempt}")
    }

    /// `{run}:{generation}:{round}:audit-started:{purpose}:{attempt}`.
    pub fn audit_started_msg_id(&self, purpose: AuditPurpose, attempt: u64) -> String {
        format!("{self}:audit-started:{}:{attempt}", purpose.as_str())
    }

    /// `{run}:{generation}:{round}:audit-report:{purpose}:{attempt}`.
    pub fn audit_report_msg_id(&self, purpose: AuditPurpose, attempt: u64) -> String {
        format!("{self}:audit-report:{}:{attempt}", purpose.as_str())
    }
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
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
