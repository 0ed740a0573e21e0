//! The contract: goal + acceptance criteria + protected paths, frozen by hash at submission.
//! Built from a task by `loopgate_common::task::Task::contract`.

use serde::{Deserialize, Serialize};

use crate::rubric::Rubric;
use crate::snapshot::sha256_hex;

/// The evidence id under which the auditor records the rubric's pass or fail.
pub const RUBRIC_EVIDENCE_ID: &str = "rubric";

/// The contract: goal, acceptance criteria and protected paths, frozen by `spec_hash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Contract {
    pub goal: String,
    pub criteria: Vec<Criterion>,
    pub protected_paths: Vec<String>,
    /// Scored dimensions and pass mark, judged by the auditor's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<Rubric>,
    /// Paths the task's author lets the work add, change or delete although a protection
    /// covers them (exact files or `dir/` prefixes, matched like `protected_paths`): the
    /// test-plumbing rule (a test runner's configuration or hook file, such as `conftest.py`)
    /// and the protected paths do not apply to them. Only the task file gives them (a
    /// proposal cannot); left out of the JSON, and so of the spec hash, when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_paths: Vec<String>,
    /// sha256 of the canonical JSON of the fields above.
    pub spec_hash: String,
}

#[derive(Serialize)]
struct HashedPart<'a> {
    goal: &'a str,
    criteria: &'a [Criterion],
    protected_paths: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    rubric: Option<&'a Rubric>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    writable_paths: &'a [String],
}

impl Contract {
    pub fn compute_hash(&self) -> String {
        let part = HashedPart {
            goal: &self.goal,
            criteria: &self.criteria,
            protected_paths: &self.protected_paths,
            rubric: self.rubric.as_ref(),
            writable_paths: &self.writable_paths,
        };
        sha256_hex(&serde_json::to_vec(&part).unwrap_or_default())
    }

    /// True when the stored hash still matches the content (the contract was not edited).
    pub fn is_intact(&self) -> bool {
        self.compute_hash() == self.spec_hash
    }

    pub fn blocking(&self) -> impl Iterator<Item = &Criterion> {
        self.criteria.iter().filter(|c| c.blocking)
    }

    /// Evidence ids the gate requires a `pass` for: every blocking criterion, and the rubric's
    /// evidence when the contract has a rubric.
    pub fn required_evidence(&self) -> impl Iterator<Item = &str> {
        self.blocking()
            .map(|c| c.id.as_str())
            .chain(self.rubric.as_ref().map(|_| RUBRIC_EVIDENCE_ID))
    }

    /// Does the task's author name `path` writable ([`Contract::writable_paths`])?
    pub fn names_writable(&self, path: &str) -> bool {
        crate::snapshot::path_in_scope(path, &self.writable_paths)
    }

    pub fn short_hash(&self) -> &str {
        self.spec_hash.get(..12).unwrap_or(&self.spec_hash)
    }
}

/// One acceptance criterion of the contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Criterion {
    pub id: String,
    pub description: String,
    /// Shell command run by the auditor in a scratch copy of the snapshot; exit 0 = pass.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub check: Option<String>,
    pub blocking: bool,
    pub timeout_secs: u64,
    /// `goal` for a criterion derived from a goal clause (left out of the JSON, and so of the
    /// spec hash, for the default `task`).
    #[serde(default, skip_serializing_if = "CriterionSource::is_task")]
    pub source: CriterionSource,
    /// The goal clause this criterion covers, quoted from the goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clause: Option<String>,
}

/// Where a criterion comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CriterionSource {
    /// The task author's (or the proposer's, for a requirement of the spec).
    #[default]
    Task,
    /// A clause of the goal: judged by the auditor's model clause by clause, or checked by a
    /// derived check.
    Goal,
}

impl CriterionSource {
    pub fn is_task(&self) -> bool {
        *self == CriterionSource::Task
    }
}
