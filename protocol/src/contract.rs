//! The contract: goal + acceptance criteria + protected paths, frozen by hash at submission.

use serde::{Deserialize, Serialize};

use crate::rubric::Rubric;
use crate::snapshot::sha256_hex;
use crate::task::{Criterion, Task, RUBRIC_EVIDENCE_ID};

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
}

impl Contract {
    /// The task's own contract (a run's also holds its derived goal criteria:
    /// [`crate::goal_criteria::contract_for`]).
    pub fn from_task(task: &Task) -> Contract {
        let mut contract = Contract {
            goal: task.goal.clone(),
            criteria: task.acceptance.clone(),
            protected_paths: task.protected_paths.clone(),
            rubric: task.rubric.clone(),
            spec_hash: String::new(),
        };
        contract.spec_hash = contract.compute_hash();
        contract
    }

    pub fn compute_hash(&self) -> String {
        let part = HashedPart {
            goal: &self.goal,
            criteria: &self.criteria,
            protected_paths: &self.protected_paths,
            rubric: self.rubric.as_ref(),
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

    pub fn short_hash(&self) -> &str {
        self.spec_hash.get(..12).unwrap_or(&self.spec_hash)
    }
}
