//! What the prompts' tests build their inputs from.

use loopgate_protocol::contract::{Criterion, CriterionSource};
use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::verdict::{CheckVerdict, Evidence};

/// Evidence of check `id` on the candidate `snap`: its verdict, exit code and output.
pub(crate) fn check_evidence(
    id: &str,
    verdict: CheckVerdict,
    exit: Option<i32>,
    out: &str,
) -> Evidence {
    Evidence {
        artifact_version: "snap".into(),
        check_id: id.into(),
        verdict,
        produced_at: 1,
        log_digest: None,
        exit_code: exit,
        duration_ms: 3,
        output_excerpt: out.into(),
        isolated: None,
        screenshots: Vec::new(),
    }
}

/// hello.py added, README.md modified, old.py removed.
pub(crate) fn one_change_of_each_kind() -> Vec<PathChange> {
    vec![
        PathChange::Added {
            path: "hello.py".into(),
        },
        PathChange::Modified {
            path: "README.md".into(),
        },
        PathChange::Removed {
            path: "old.py".into(),
        },
    ]
}

/// A blocking goal criterion `id` that quotes `clause` and has no check.
pub(crate) fn goal_criterion(id: &str, clause: &str) -> Criterion {
    Criterion {
        id: id.into(),
        description: String::new(),
        check: None,
        blocking: true,
        timeout_secs: 5,
        source: CriterionSource::Goal,
        clause: Some(clause.into()),
    }
}
