//! One audit of a frozen candidate: materialize it into a fresh scratch directory (every blob
//! re-hashed), diff it against the base, run every contract check in its own scratch copy
//! under the host's sandbox, derive the verdicts mechanically, optionally ask the judge model
//! (which may only tighten them), score the contract's rubric and build the report, signed with
//! the pool's key when one is configured.
//!
//! `audit/` is the one home of `impl Auditor`, split by concern: the auditor itself
//! (`auditor.rs`), the entry point and the report (`report.rs`), the phases (`pipeline.rs`,
//! `plan.rs`), the checks (`run_checks.rs`, `clause_runs.rs`) and the candidate's tree
//! (`workspace.rs`). The judge and the rubric are handed a `JudgeContext`, never the auditor.
//! The decisions are pure: `verdict_rules.rs` (with `test_plumbing.rs`) and `records.rs`.

mod auditor;
mod clause_runs;
mod findings;
mod pipeline;
mod plan;
mod progress;
mod records;
mod report;
mod run_checks;
#[cfg(test)]
mod test_contracts;
mod test_plumbing;
mod verdict_rules;
mod workspace;

pub use auditor::{AuditError, Auditor, AuditorParts};
pub(crate) use progress::{AuditNow, AuditProgressTx};
pub(crate) use records::report_msg_id;
