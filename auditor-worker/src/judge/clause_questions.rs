//! The questions the clause judge is asked: one per blocking goal clause the contract has no
//! working check for: a `source = "goal"` criterion without a check, or one whose derived check
//! is set aside (broken by its own text, found without the candidate: `check_text`). A derived
//! check that failed on the candidate is never one of them, whatever it printed.

use loopgate_common::goal::criteria::judged_clauses;
use loopgate_common::goal::derived_checks::SetAside;
use loopgate_protocol::contract::Criterion;
use loopgate_protocol::wire::AuditRequest;

/// A clause to judge: its criterion, and why its own check does not decide (broken), if it has
/// one.
#[derive(Debug, Clone)]
pub(crate) struct ClauseQuestion<'a> {
    pub criterion: &'a Criterion,
    pub clause: &'a str,
    pub broken: Option<String>,
}

/// The clauses of `req`'s contract to ask about: blocking goal criteria without a check, then
/// the derived checks `set_aside`.
pub(crate) fn clause_questions<'a>(
    req: &'a AuditRequest,
    set_aside: &[SetAside<'a>],
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
    out.extend(set_aside.iter().map(|s| ClauseQuestion {
        criterion: s.criterion,
        clause: s.clause,
        broken: Some(s.why.clone()),
    }));
    out
}
