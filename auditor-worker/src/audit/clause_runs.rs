//! Running what the clause judge is shown besides the files (`judge::clause_commands`): the
//! commands the clause questions quote and the calls the goal writes out, each in its own
//! sandboxed copy of the candidate like a check, under `scratch/clause-commands`.

use std::time::Duration;

use loopgate_common::goal::derived_checks::SetAside;

use crate::audit::auditor::Auditor;
use crate::audit::pipeline::Audited;
use crate::audit::progress::AuditProgressTx;
use crate::evidence::EvidenceBucket;
use crate::judge::clause_commands::{command_runs, plan_clause_commands, CommandRun};
use crate::judge_context::JudgeContext;

impl Auditor {
    /// What the clause questions' commands print on the candidate. A failure to run them
    /// leaves the judge without them (logged), never fails the audit.
    pub(super) async fn run_clause_commands(
        &self,
        cx: &JudgeContext<'_>,
        audited: &Audited<'_>,
        set_aside: &[SetAside<'_>],
    ) -> Vec<CommandRun> {
        let manifest = audited.candidate;
        let planned = plan_clause_commands(cx, manifest, set_aside).await;
        if planned.is_empty() {
            return Vec::new();
        }
        let dir = audited.scratch.join("clause-commands");
        if let Err(err) = tokio::fs::create_dir_all(&dir).await {
            tracing::warn!(error = %err, "preparing to run the clauses' commands; skipped");
            return Vec::new();
        }
        let mut probe = cx.req.clone();
        probe.contract.criteria = planned.iter().map(|r| r.criterion.clone()).collect();
        let mut gaps = Vec::new();
        // Their output goes to the judge, not to the evidence bucket: the report names none.
        let unstored = EvidenceBucket::new(None).writes(Duration::ZERO);
        let runs = Audited {
            req: &probe,
            scratch: &dir,
            progress: &AuditProgressTx::default(),
            writes: &unstored,
            ..*audited
        };
        match self.run_checks(&runs, &mut gaps).await {
            Ok(runs) => command_runs(planned, &runs),
            Err(err) => {
                tracing::warn!(error = %err, "running the clauses' commands; skipped");
                Vec::new()
            }
        }
    }
}
