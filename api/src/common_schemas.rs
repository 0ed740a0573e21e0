//! OpenAPI schemas of the `loopgate-common` types the API carries (task files, budgets,
//! contracts, verdicts, manifests, ...). `common` stays free of schema code, so each type is
//! described here by a schema-only twin with the same serde shape; the tests below fail when a
//! twin's fields drift from the type it describes. These structs are never built at run time.
#![allow(dead_code)]

use utoipa::ToSchema;

/// A run's state (`lg:runs:<state>` indexes the same names).
#[derive(ToSchema)]
#[schema(as = RunState)]
#[serde(rename_all = "snake_case")]
pub enum RunStateSchema {
    Queued,
    Running,
    WaitingForInput,
    Completed,
    Blocked,
    BudgetExhausted,
    Cancelled,
    Failed,
}

/// What the run is waiting for right now.
#[derive(ToSchema)]
#[schema(as = PhaseName)]
#[serde(rename_all = "snake_case")]
pub enum PhaseNameSchema {
    Deciding,
    Executing,
    Auditing,
    WaitingForAnswer,
    Finished,
}

/// Where planning stands while a `plan = true` run builds its contract.
#[derive(ToSchema)]
#[schema(as = PlanningStage)]
#[serde(rename_all = "snake_case")]
pub enum PlanningStageSchema {
    Spec,
    Contract,
    Approval,
}

/// The task file (TOML) as JSON; unknown keys are refused.
#[derive(ToSchema)]
#[schema(as = TaskFile)]
#[serde(deny_unknown_fields)]
pub struct TaskFileSchema {
    name: Option<String>,
    goal: String,
    #[serde(default)]
    acceptance: Vec<AcceptanceFileSchema>,
    #[serde(default)]
    roles: RolesFileSchema,
    #[serde(default)]
    budget: BudgetFileSchema,
    /// Paths the executor must not change (exact files or `dir/` prefixes).
    #[serde(default)]
    protected_paths: Vec<String>,
    /// Complete as soon as an audit passes the gate over every criterion (default true).
    complete_on_gate: Option<bool>,
    /// Extra gitignore-style paths never frozen into snapshots.
    #[serde(default)]
    ignore: Vec<String>,
    /// Plan the contract from the goal before round 1.
    plan: Option<bool>,
    /// With `plan`: wait for a person to approve the proposed contract.
    require_approval: Option<bool>,
    #[serde(default)]
    rubric: Vec<RubricDimensionSchema>,
    /// The rubric's pass mark on 0..10 (default 8.0; `threshold` is accepted as an alias).
    rubric_threshold: Option<f64>,
}

/// One `[[acceptance]]` criterion as written.
#[derive(ToSchema)]
#[schema(as = AcceptanceFile)]
#[serde(deny_unknown_fields)]
pub struct AcceptanceFileSchema {
    id: String,
    #[serde(default)]
    description: String,
    /// Shell command run by the auditor; exit 0 = pass.
    check: Option<String>,
    blocking: Option<bool>,
    timeout_secs: Option<u64>,
}

/// Model profile names per role.
#[derive(ToSchema)]
#[schema(as = RolesFile)]
#[serde(deny_unknown_fields)]
pub struct RolesFileSchema {
    manager: Option<String>,
    executor: Option<ProfileChoiceSchema>,
    auditor: Option<String>,
}

/// One profile name, or a cost-ordered ladder of them.
#[derive(ToSchema)]
#[schema(as = ProfileChoice)]
#[serde(untagged)]
pub enum ProfileChoiceSchema {
    One(String),
    Ladder(Vec<String>),
}

/// The task file's `[budget]` keys (also the body of a resume's budget changes).
#[derive(ToSchema)]
#[schema(as = BudgetFile)]
#[serde(deny_unknown_fields)]
pub struct BudgetFileSchema {
    max_rounds: Option<u32>,
    max_invalid_outputs: Option<u32>,
    manager_episode_secs: Option<u64>,
    executor_episode_secs: Option<u64>,
    auditor_episode_secs: Option<u64>,
    max_steps: Option<u32>,
    max_total_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
    max_wall_secs: Option<u64>,
    max_failed_rounds: Option<u32>,
    start_secs: Option<u64>,
    escalate_after: Option<u32>,
    max_done_refusals: Option<u32>,
    self_checks: Option<u32>,
}

/// One scored rubric dimension.
#[derive(ToSchema)]
#[schema(as = RubricDimension)]
#[serde(deny_unknown_fields)]
pub struct RubricDimensionSchema {
    name: String,
    #[serde(default)]
    weight: f64,
    #[serde(default)]
    description: String,
}

/// The contract's rubric: weighted dimensions and the pass threshold on 0..10.
#[derive(ToSchema)]
#[schema(as = Rubric)]
pub struct RubricSchema {
    dimensions: Vec<RubricDimensionSchema>,
    threshold: f64,
}

/// The contract: goal, acceptance criteria and protected paths, frozen by `spec_hash`.
#[derive(ToSchema)]
#[schema(as = Contract)]
pub struct ContractSchema {
    goal: String,
    criteria: Vec<CriterionSchema>,
    protected_paths: Vec<String>,
    #[serde(default)]
    rubric: Option<RubricSchema>,
    spec_hash: String,
}

/// One acceptance criterion of the contract.
#[derive(ToSchema)]
#[schema(as = Criterion)]
pub struct CriterionSchema {
    id: String,
    description: String,
    #[schema(required = true)]
    check: Option<String>,
    blocking: bool,
    timeout_secs: u64,
}

#[derive(ToSchema)]
#[schema(as = AuditStatus)]
#[serde(rename_all = "snake_case")]
pub enum AuditStatusSchema {
    Complete,
    Incomplete,
    Blocked,
}

#[derive(ToSchema)]
#[schema(as = Integrity)]
#[serde(rename_all = "snake_case")]
pub enum IntegritySchema {
    Clean,
    Suspect,
    Violation,
}

#[derive(ToSchema)]
#[schema(as = ContractVerdict)]
#[serde(rename_all = "snake_case")]
pub enum ContractVerdictSchema {
    Aligned,
    Unknown,
    NeedsRevision,
    Invalid,
}

#[derive(ToSchema)]
#[schema(as = CheckVerdict)]
#[serde(rename_all = "snake_case")]
pub enum CheckVerdictSchema {
    Pass,
    Fail,
    Inconclusive,
}

/// The three verdicts of an audit.
#[derive(ToSchema)]
#[schema(as = Verdicts)]
pub struct VerdictsSchema {
    status: AuditStatusSchema,
    integrity: IntegritySchema,
    contract: ContractVerdictSchema,
}

/// What the rubric's judge recommends next.
#[derive(ToSchema)]
#[schema(as = Strategy)]
#[serde(rename_all = "snake_case")]
pub enum StrategySchema {
    Finish,
    Refine,
    Pivot,
}

/// Where the run's rubric stands on its current snapshot.
#[derive(ToSchema)]
#[schema(as = RubricStanding)]
pub struct RubricStandingSchema {
    snapshot: String,
    #[schema(required = true)]
    average: Option<f64>,
    threshold: f64,
    #[schema(required = true)]
    strategy: Option<StrategySchema>,
    passed: bool,
}

/// Tokens and cost (micro-dollars) one role used.
#[derive(ToSchema)]
#[schema(as = Usage)]
pub struct UsageSchema {
    input_tokens: u64,
    output_tokens: u64,
    cost_micros: u64,
}

/// Usage per role.
#[derive(ToSchema)]
#[schema(as = RoleUsage)]
pub struct RoleUsageSchema {
    manager: UsageSchema,
    executor: UsageSchema,
    auditor: UsageSchema,
}

/// One file of a snapshot.
#[derive(ToSchema)]
#[schema(as = ManifestEntry)]
pub struct ManifestEntrySchema {
    path: String,
    /// Unix permission bits (420 = 0o644, 493 = 0o755).
    mode: u32,
    size: u64,
    sha256: String,
}

/// A snapshot's manifest; the snapshot id is the sha256 of its canonical JSON.
#[derive(ToSchema)]
#[schema(as = Manifest)]
pub struct ManifestSchema {
    v: u32,
    entries: Vec<ManifestEntrySchema>,
}

/// One run log entry (`LogEntry` in `loopgate-common`) with its stream id; `type` names the
/// event and decides the other fields. An entry this manager cannot read is `null`.
#[derive(ToSchema)]
#[schema(as = LogRecord)]
pub struct LogRecordSchema {
    /// The Redis stream id (`1700000000000-0`), also the SSE event id.
    id: String,
    at: i64,
    generation: u32,
    round: u32,
    /// The event (`decision`, `exec_result`, `audit_report`, `gate`, `terminal`, ...); the
    /// other keys depend on it.
    #[serde(rename = "type")]
    kind: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeSet;

    use loopgate_common::budget::BudgetFile;
    use loopgate_common::contract::Contract;
    use loopgate_common::rubric::{Rubric, RubricDimension, RubricStanding, Strategy};
    use loopgate_common::snapshot::{Manifest, ManifestEntry};
    use loopgate_common::state::{PlanningStage, RoleUsage, RunState};
    use loopgate_common::task::{AcceptanceFile, Criterion, ProfileChoice, RolesFile, TaskFile};
    use loopgate_common::verdict::{
        AuditStatus, CheckVerdict, ContractVerdict, Integrity, Verdicts,
    };
    use serde::Serialize;
    use serde_json::{json, Value};
    use utoipa::PartialSchema;

    use super::*;

    fn schema_json<T: PartialSchema>() -> Value {
        serde_json::to_value(T::schema()).unwrap()
    }

    fn properties(schema: &Value) -> BTreeSet<String> {
        schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn keys(value: impl Serialize) -> BTreeSet<String> {
        serde_json::to_value(value)
            .unwrap()
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn names<T: Serialize>(values: &[T]) -> Vec<Value> {
        values
            .iter()
            .map(|v| serde_json::to_value(v).unwrap())
            .collect()
    }

    fn full_budget() -> BudgetFile {
        BudgetFile {
            max_rounds: Some(1),
            max_invalid_outputs: Some(1),
            manager_episode_secs: Some(1),
            executor_episode_secs: Some(1),
            auditor_episode_secs: Some(1),
            max_steps: Some(1),
            max_total_tokens: Some(1),
            max_cost_usd: Some(1.0),
            max_wall_secs: Some(1),
            max_failed_rounds: Some(1),
            start_secs: Some(1),
            escalate_after: Some(1),
            max_done_refusals: Some(1),
            self_checks: Some(1),
        }
    }

    fn dimension() -> RubricDimension {
        RubricDimension {
            name: "n".into(),
            weight: 1.0,
            description: "d".into(),
        }
    }

    fn contract() -> Contract {
        Contract {
            goal: "g".into(),
            criteria: vec![],
            protected_paths: vec![],
            rubric: Some(Rubric {
                dimensions: vec![dimension()],
                threshold: 8.0,
            }),
            spec_hash: "h".into(),
        }
    }

    /// Every twin lists exactly the fields its type serializes (all optional fields set).
    #[test]
    fn twins_have_the_fields_of_their_types() {
        let task = TaskFile {
            name: Some("n".into()),
            goal: "g".into(),
            acceptance: vec![],
            roles: RolesFile::default(),
            budget: BudgetFile::default(),
            protected_paths: vec!["p".into()],
            complete_on_gate: Some(true),
            ignore: vec!["i".into()],
            plan: Some(true),
            require_approval: Some(true),
            rubric: vec![dimension()],
            rubric_threshold: Some(8.0),
        };
        let acceptance = AcceptanceFile {
            id: "a".into(),
            description: "d".into(),
            check: Some("true".into()),
            blocking: Some(true),
            timeout_secs: Some(1),
        };
        let roles = RolesFile {
            manager: Some("m".into()),
            executor: Some(ProfileChoice::One("e".into())),
            auditor: Some("a".into()),
        };
        let criterion = Criterion {
            id: "c".into(),
            description: "d".into(),
            check: None,
            blocking: true,
            timeout_secs: 1,
        };
        let standing = RubricStanding {
            snapshot: "s".into(),
            average: Some(1.0),
            threshold: 8.0,
            strategy: Some(Strategy::Finish),
            passed: false,
        };
        let verdicts = Verdicts {
            status: AuditStatus::Complete,
            integrity: Integrity::Clean,
            contract: ContractVerdict::Aligned,
        };
        let manifest = Manifest {
            v: 1,
            entries: vec![ManifestEntry {
                path: "p".into(),
                mode: 0o644,
                size: 1,
                sha256: "0".repeat(64),
            }],
        };
        let cases: Vec<(&str, BTreeSet<String>, Value)> = vec![
            ("TaskFile", keys(&task), schema_json::<TaskFileSchema>()),
            (
                "AcceptanceFile",
                keys(&acceptance),
                schema_json::<AcceptanceFileSchema>(),
            ),
            ("RolesFile", keys(&roles), schema_json::<RolesFileSchema>()),
            (
                "BudgetFile",
                keys(full_budget()),
                schema_json::<BudgetFileSchema>(),
            ),
            (
                "RubricDimension",
                keys(dimension()),
                schema_json::<RubricDimensionSchema>(),
            ),
            (
                "Rubric",
                keys(contract().rubric),
                schema_json::<RubricSchema>(),
            ),
            (
                "Contract",
                keys(contract()),
                schema_json::<ContractSchema>(),
            ),
            (
                "Criterion",
                keys(&criterion),
                schema_json::<CriterionSchema>(),
            ),
            ("Verdicts", keys(verdicts), schema_json::<VerdictsSchema>()),
            (
                "RubricStanding",
                keys(&standing),
                schema_json::<RubricStandingSchema>(),
            ),
            (
                "RoleUsage",
                keys(RoleUsage::default()),
                schema_json::<RoleUsageSchema>(),
            ),
            (
                "Usage",
                keys(RoleUsage::default().manager),
                schema_json::<UsageSchema>(),
            ),
            ("Manifest", keys(&manifest), schema_json::<ManifestSchema>()),
            (
                "ManifestEntry",
                keys(&manifest.entries[0]),
                schema_json::<ManifestEntrySchema>(),
            ),
        ];
        for (name, fields, schema) in cases {
            assert_eq!(fields, properties(&schema), "{name}: {schema}");
        }
    }

    #[test]
    fn enum_twins_list_every_value() {
        let cases: Vec<(&str, Vec<Value>, Value)> = vec![
            (
                "RunState",
                names(&RunState::ALL),
                schema_json::<RunStateSchema>(),
            ),
            (
                "AuditStatus",
                names(&[
                    AuditStatus::Complete,
                    AuditStatus::Incomplete,
                    AuditStatus::Blocked,
                ]),
                schema_json::<AuditStatusSchema>(),
            ),
            (
                "Integrity",
                names(&[Integrity::Clean, Integrity::Suspect, Integrity::Violation]),
                schema_json::<IntegritySchema>(),
            ),
            (
                "ContractVerdict",
                names(&[
                    ContractVerdict::Aligned,
                    ContractVerdict::Unknown,
                    ContractVerdict::NeedsRevision,
                    ContractVerdict::Invalid,
                ]),
                schema_json::<ContractVerdictSchema>(),
            ),
            (
                "CheckVerdict",
                names(&[
                    CheckVerdict::Pass,
                    CheckVerdict::Fail,
                    CheckVerdict::Inconclusive,
                ]),
                schema_json::<CheckVerdictSchema>(),
            ),
            (
                "Strategy",
                names(&[Strategy::Finish, Strategy::Refine, Strategy::Pivot]),
                schema_json::<StrategySchema>(),
            ),
            (
                "PlanningStage",
                names(&[
                    PlanningStage::Spec,
                    PlanningStage::Contract,
                    PlanningStage::Approval,
                ]),
                schema_json::<PlanningStageSchema>(),
            ),
        ];
        for (name, values, schema) in cases {
            assert_eq!(json!(values), schema["enum"], "{name}");
        }
    }

    /// Refused keys are refused by the schema too (`deny_unknown_fields` on both sides).
    #[test]
    fn strict_request_twins_forbid_unknown_keys() {
        for schema in [
            schema_json::<TaskFileSchema>(),
            schema_json::<AcceptanceFileSchema>(),
            schema_json::<RolesFileSchema>(),
            schema_json::<BudgetFileSchema>(),
            schema_json::<RubricDimensionSchema>(),
        ] {
            assert_eq!(schema["additionalProperties"], json!(false), "{schema}");
        }
    }
}
