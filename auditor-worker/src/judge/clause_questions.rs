//! The questions the clause judge is asked: one per blocking goal clause the contract has no
//! working check for (a `source = "goal"` criterion without a check, or one whose derived check
//! is broken on the candidate).

use loopgate_common::goal::criteria::{broken_check, judged_clauses};
use loopgate_protocol::contract::{Criterion, CriterionSource};
use loopgate_protocol::verdict::{CheckVerdict, Evidence};
use loopgate_protocol::wire::AuditRequest;

/// A clause to judge: its criterion, and why its own check does not decide (broken), if it has
/// one.
#[derive(Debug, Clone)]
pub(crate) struct ClauseQuestion<'a> {
    pub criterion: &'a Criterion,
    pub clause: &'a str,
    pub broken: Option<String>,
}

/// The clauses of `req`'s contract to ask about, given the checks' evidence on the candidate:
/// blocking goal criteria without a check, and derived checks found broken.
pub(crate) fn clause_questions<'a>(
    req: &'a AuditRequest,
    evidence: &[Evidence],
) -> Vec<ClauseQuestion<'a>> {
    let mut out: Vec<ClauseQuestion<'a>> = judged_clauses(&req.contract.criteria)
        .filter_map(|c| {
            Some(ClauseQuestion {
                criterion: c,
                clause: c.clause.as_deref()?,
                broken: None,
            })
        })
        .collect();
    for c in &req.contract.criteria {
        if c.source != CriterionSource::Goal || c.check.is_none() {
            continue;
        }
        let (Some(clause), Some(e)) = (
            c.clause.as_deref(),
            evidence.iter().find(|e| e.check_id == c.id),
        ) else {
            continue;
        };
        if e.verdict == CheckVerdict::Pass {
            continue;
        }
        if let Some(why) = broken_check(e.exit_code, &e.output_excerpt) {
            out.push(ClauseQuestion {
                criterion: c,
                clause,
                broken: Some(why),
            });
        }
    }
    out
}
