//! Task files: the user's goal, acceptance criteria, roles and budget, validated with errors
//! that name the bad field.

use serde::{Deserialize, Serialize};

use crate::budget::{Budget, BudgetFile};
use loopgate_protocol::contract::{Contract, Criterion, CriterionSource, RUBRIC_EVIDENCE_ID};
use loopgate_protocol::gui::{GuiFile, GuiSpec};
use loopgate_protocol::rubric::{Rubric, RubricDimension};

/// The task file exactly as written (TOML or the same shape in JSON). Unknown keys are errors.
///
/// The OpenAPI schema states each key's own rule as [`TaskFile::validate`] checks it (a
/// pattern's class of spaces is what `str::trim` removes; `loopgate-api`'s tests hold the two
/// together); rules across keys (criteria or `plan`, a rubric's judge, unique ids) and the
/// model profiles a manager has are checked only when the task is submitted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Not blank; at most 20000 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = r"[^\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]",
            max_length = 20000
        )
    )]
    pub goal: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub acceptance: Vec<AcceptanceFile>,
    #[serde(default)]
    pub roles: RolesFile,
    #[serde(default)]
    pub budget: BudgetFile,
    /// Paths the executor must not change (exact files or `dir/` prefixes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_paths: Vec<String>,
    /// Paths the work may add, change or delete although a protection covers them: a test
    /// runner's configuration or hook file (`conftest.py`, `pytest.ini`, `pyproject.toml`,
    /// `jest.config.js`, ...), a default-protected test file (exact files or `dir/` prefixes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_paths: Vec<String>,
    /// Complete as soon as an audit passes the gate over every criterion (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_on_gate: Option<bool>,
    /// Extra paths never frozen into snapshots (gitignore-style, e.g. `build/`, `*.log`), on top
    /// of the defaults (`.git/`, `target/`, `node_modules/`, `__pycache__/`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<String>,
    /// Start from the goal only: a planner episode writes `spec.md`, a proposer episode turns it
    /// into the contract (`contract.toml`), which is validated and frozen before round 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<bool>,
    /// With `plan = true`: pause in `waiting_for_input` until a person approves the proposed
    /// contract (`loopgate approve RUN [--edit FILE]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_approval: Option<bool>,
    /// Scored dimensions judged by the auditor's model (`[[rubric]] name, weight, description`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rubric: Vec<RubricDimension>,
    /// The rubric's pass mark on 0..10 (default 8.0); `threshold` is accepted as an alias.
    #[serde(default, alias = "threshold", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0, maximum = 10))]
    pub rubric_threshold: Option<f64>,
    /// Turn every goal clause no criterion covers into a judged criterion (`source = "goal"`)
    /// of the frozen contract (default true; needs `roles.auditor`, the judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derive_criteria: Option<bool>,
    /// A judged clause passes on `met` only when the judge quotes a line of a file or of a
    /// command's output it was shown, found there verbatim (default true); false takes a bare
    /// `met`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_quotes: Option<bool>,
    /// `[gui] backend, serve, url`: the backend gui episodes need (`browser` or `desktop`) and
    /// what serves the artifact for browser episodes and browser checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gui: Option<GuiFile>,
}

/// One `[[acceptance]]` criterion as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AcceptanceFile {
    #[cfg_attr(feature = "openapi", schema(value_type = name_schemas::Name))]
    pub id: String,
    #[serde(default)]
    pub description: String,
    /// Shell command run by the auditor; exit 0 = pass. Not blank when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = r"[^\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
        )
    )]
    pub check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3600))]
    pub timeout_secs: Option<u64>,
    /// `"goal"` for a criterion derived from a goal clause (written by the proposer or by
    /// loopgate), `"task"` (the default) for the author's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<CriterionSource>,
    /// The goal clause this criterion covers, quoted from the goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clause: Option<String>,
}

/// One profile name, or a cost-ordered ladder of them (`executor = ["cheap", "strong"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProfileChoice {
    One(String),
    Ladder(Vec<String>),
}

/// The OpenAPI schemas of names in a task file (only the schemas exist).
#[cfg(feature = "openapi")]
pub mod name_schemas;

/// Model profile names per role, as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RolesFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<name_schemas::Name>))]
    pub manager: Option<String>,
    /// A profile, or a ladder escalated after `budget.escalate_after` failed audits in a row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<name_schemas::ProfileChoice>))]
    pub executor: Option<ProfileChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<name_schemas::Name>))]
    pub auditor: Option<String>,
}

/// Model profile names per role; the profiles themselves live in the daemons' config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roles {
    pub manager: String,
    /// The executor profile for the first rounds (the ladder's first rung).
    pub executor: String,
    /// Profiles to escalate to, in order, after repeated failed audits (may be empty).
    #[serde(default)]
    pub executor_escalation: Vec<String>,
    /// Without an auditor model the audit is mechanical only.
    pub auditor: Option<String>,
}

/// A validated task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub name: Option<String>,
    pub goal: String,
    pub acceptance: Vec<Criterion>,
    pub roles: Roles,
    pub budget: Budget,
    pub protected_paths: Vec<String>,
    /// See [`TaskFile::writable_paths`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_paths: Vec<String>,
    pub complete_on_gate: bool,
    #[serde(default)]
    pub ignore: Vec<String>,
    /// Plan the contract from the goal before round 1 (see [`TaskFile::plan`]).
    #[serde(default)]
    pub plan: bool,
    /// Wait for a person to approve the planned contract.
    #[serde(default)]
    pub require_approval: bool,
    /// The user's rubric, scored by the auditor's judge (needs `roles.auditor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<Rubric>,
    /// Derive judged criteria from the goal's uncovered clauses (see
    /// [`TaskFile::derive_criteria`]).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub derive_criteria: bool,
    /// A judged clause's `met` must quote its evidence (see [`TaskFile::judge_quotes`]).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub judge_quotes: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gui: Option<GuiSpec>,
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

pub const DEFAULT_PROFILE: &str = "local";
pub const DEFAULT_CHECK_TIMEOUT_SECS: u64 = 120;
pub const MAX_CHECK_TIMEOUT_SECS: u64 = 3600;
pub const MAX_GOAL_CHARS: usize = 20_000;
pub const MAX_CRITERIA: usize = 100;
/// The rubric's pass mark when a task gives `[[rubric]]` without `rubric_threshold`.
pub const DEFAULT_RUBRIC_THRESHOLD: f64 = 8.0;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    #[error("not valid TOML: {0}")]
    Syntax(String),
    #[error("task field `{field}`: {problem}")]
    Invalid { field: String, problem: String },
}

impl TaskError {
    fn field(field: impl Into<String>, problem: impl Into<String>) -> Self {
        TaskError::Invalid {
            field: field.into(),
            problem: problem.into(),
        }
    }
    /// The field a validation error names, if any.
    pub fn field_name(&self) -> Option<&str> {
        match self {
            TaskError::Invalid { field, .. } => Some(field),
            TaskError::Syntax(_) => None,
        }
    }
}

fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

fn clean_profile(field: &str, value: &Option<String>) -> Result<Option<String>, TaskError> {
    match value {
        None => Ok(None),
        Some(name) if is_valid_id(name.trim()) => Ok(Some(name.trim().to_string())),
        Some(_) => Err(TaskError::field(
            field,
            "must be a model profile name (letters, digits, '-', '_', '.')",
        )),
    }
}

/// A goal as kept (trimmed), or why it is refused.
fn validate_goal(goal: &str) -> Result<&str, TaskError> {
    let goal = goal.trim();
    if goal.is_empty() {
        return Err(TaskError::field("goal", "must not be empty"));
    }
    if goal.chars().count() > MAX_GOAL_CHARS {
        return Err(TaskError::field(
            "goal",
            format!("is longer than {MAX_GOAL_CHARS} characters"),
        ));
    }
    Ok(goal)
}

impl Task {
    /// The task's own contract (a run's also holds its derived goal criteria:
    /// [`crate::goal::criteria::contract_for`]).
    pub fn contract(&self) -> Contract {
        let mut contract = Contract {
            goal: self.goal.clone(),
            criteria: self.acceptance.clone(),
            protected_paths: self.protected_paths.clone(),
            rubric: self.rubric.clone(),
            writable_paths: self.writable_paths.clone(),
            spec_hash: String::new(),
        };
        contract.spec_hash = contract.compute_hash();
        contract
    }

    /// The same task with another goal (validated as a task file's goal is): what a completed
    /// run continues with when only the goal is given.
    pub fn with_goal(&self, goal: &str) -> Result<Task, TaskError> {
        let goal = validate_goal(goal)?;
        Ok(Task {
            goal: goal.to_string(),
            ..self.clone()
        })
    }
}

impl TaskFile {
    pub fn validate(&self) -> Result<Task, TaskError> {
        let goal = validate_goal(&self.goal)?;
        let plan = self.plan.unwrap_or(false);
        if self.acceptance.is_empty() && !plan {
            return Err(TaskError::field(
                "acceptance",
                "at least one [[acceptance]] criterion is required (or set plan = true to plan the contract from the goal)",
            ));
        }
        let acceptance = validate_criteria(&self.acceptance, "acceptance")?;
        let roles = validate_roles(&self.roles)?;
        let budget = self
            .budget
            .validate()
            .map_err(|(field, problem)| TaskError::field(format!("budget.{field}"), problem))?;
        let protected_paths = validate_protected_paths(&self.protected_paths, "protected_paths")?;
        let writable_paths = validate_writable_paths(&self.writable_paths, &protected_paths)?;
        let rubric = validate_rubric(&self.rubric, self.rubric_threshold)?;
        if rubric.is_some() && roles.auditor.is_none() {
            return Err(TaskError::field(
                "roles.auditor",
                "a [[rubric]] is scored by the auditor's judge model: set roles.auditor to a model profile",
            ));
        }
        let derive_criteria = self.derive_criteria.unwrap_or(true);
        judges_unchecked_clauses(&acceptance, &roles)?;
        let require_approval = self.require_approval.unwrap_or(false);
        if require_approval && !plan {
            return Err(TaskError::field(
                "require_approval",
                "applies to a planned contract: set plan = true too",
            ));
        }
        let ignore = validate_ignore(&self.ignore)?;
        Ok(Task {
            ignore,
            name: self.name.clone().filter(|n| !n.trim().is_empty()),
            goal: goal.to_string(),
            acceptance,
            roles,
            budget,
            protected_paths,
            writable_paths,
            complete_on_gate: self.complete_on_gate.unwrap_or(true),
            plan,
            require_approval,
            rubric,
            derive_criteria,
            judge_quotes: self.judge_quotes.unwrap_or(true),
            gui: self
                .gui
                .as_ref()
                .map(GuiFile::validate)
                .transpose()
                .map_err(|(field, problem)| TaskError::field(field, problem))?,
        })
    }
}

/// The roles' model profiles: the manager's (default when not given), the executor's ladder
/// (one profile or a non-empty list without repeats; the first runs, the rest are its
/// escalation) and the auditor's judge, if any.
fn validate_roles(roles: &RolesFile) -> Result<Roles, TaskError> {
    let ladder: Vec<String> = match &roles.executor {
        None => vec![DEFAULT_PROFILE.to_string()],
        Some(ProfileChoice::One(name)) => vec![name.clone()],
        Some(ProfileChoice::Ladder(names)) if names.is_empty() => {
            return Err(TaskError::field(
                "roles.executor",
                "the profile list must not be empty",
            ))
        }
        Some(ProfileChoice::Ladder(names)) => names.clone(),
    };
    let mut executors = Vec::with_capacity(ladder.len());
    for (i, name) in ladder.iter().enumerate() {
        let field = if ladder.len() == 1 {
            "roles.executor".to_string()
        } else {
            format!("roles.executor[{i}]")
        };
        let name = clean_profile(&field, &Some(name.clone()))?.unwrap_or_default();
        if executors.contains(&name) {
            return Err(TaskError::field(
                field,
                format!("profile '{name}' appears twice"),
            ));
        }
        executors.push(name);
    }
    Ok(Roles {
        manager: clean_profile("roles.manager", &roles.manager)?
            .unwrap_or_else(|| DEFAULT_PROFILE.to_string()),
        executor: executors.remove(0),
        executor_escalation: executors,
        auditor: clean_profile("roles.auditor", &roles.auditor)?,
    })
}

/// A blocking criterion without a check is judged by the auditor's model, so it needs one.
fn judges_unchecked_clauses(acceptance: &[Criterion], roles: &Roles) -> Result<(), TaskError> {
    let unchecked = acceptance
        .iter()
        .position(|c| c.blocking && c.check.is_none());
    match unchecked {
        Some(i) if roles.auditor.is_none() => Err(TaskError::field(
            format!("acceptance[{i}].check"),
            "a blocking goal clause without a check is judged by the auditor's model: \
             set roles.auditor, give it a check, or set blocking = false",
        )),
        _ => Ok(()),
    }
}

/// `ignore` patterns: non-empty, relative to the workspace, trimmed.
fn validate_ignore(patterns: &[String]) -> Result<Vec<String>, TaskError> {
    let mut ignore = Vec::new();
    for (i, pattern) in patterns.iter().enumerate() {
        let p = pattern.trim();
        if p.is_empty() || p.starts_with('/') || p.split('/').any(|c| c == "..") || p.contains('\0')
        {
            return Err(TaskError::field(
                format!("ignore[{i}]"),
                "must be a non-empty pattern relative to the workspace",
            ));
        }
        ignore.push(p.to_string());
    }
    Ok(ignore)
}

/// Validate `[[acceptance]]` entries (task files and contract proposals); errors name
/// `{field}[i].x`.
pub(crate) fn validate_criteria(
    items: &[AcceptanceFile],
    field: &str,
) -> Result<Vec<Criterion>, TaskError> {
    if items.len() > MAX_CRITERIA {
        return Err(TaskError::field(
            field,
            format!("at most {MAX_CRITERIA} criteria"),
        ));
    }
    let mut acceptance: Vec<Criterion> = Vec::with_capacity(items.len());
    for (i, a) in items.iter().enumerate() {
        let at = |f: &str| format!("{field}[{i}].{f}");
        let criterion = validate_criterion(a, &acceptance, at)?;
        acceptance.push(criterion);
    }
    Ok(acceptance)
}

/// One `[[acceptance]]` entry, given the ones before it; `at` names a key of this entry.
fn validate_criterion(
    a: &AcceptanceFile,
    earlier: &[Criterion],
    at: impl Fn(&str) -> String,
) -> Result<Criterion, TaskError> {
    let id = a.id.trim();
    if !is_valid_id(id) {
        return Err(TaskError::field(
            at("id"),
            "must be 1-64 chars of letters, digits, '-', '_', '.'",
        ));
    }
    if id == RUBRIC_EVIDENCE_ID {
        return Err(TaskError::field(
            at("id"),
            format!("'{RUBRIC_EVIDENCE_ID}' is reserved for the rubric's evidence"),
        ));
    }
    if earlier.iter().any(|c| c.id == id) {
        return Err(TaskError::field(at("id"), format!("duplicate id '{id}'")));
    }
    let check = a
        .check
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    if a.check.is_some() && check.is_none() {
        return Err(TaskError::field(
            at("check"),
            "must not be empty when given",
        ));
    }
    let clause = a
        .clause
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    let source = a.source.unwrap_or_default();
    if source == CriterionSource::Goal && clause.is_none() {
        return Err(TaskError::field(
            at("clause"),
            "a criterion with source = \"goal\" quotes the goal clause it covers",
        ));
    }
    let blocking = a.blocking.unwrap_or(true);
    // A goal clause without a check is judged by the auditor's model, clause by clause.
    if blocking && check.is_none() && source != CriterionSource::Goal {
        return Err(TaskError::field(
            at("check"),
            "a blocking criterion needs a check command (set blocking = false for judged-only criteria)",
        ));
    }
    let timeout_secs = a.timeout_secs.unwrap_or(DEFAULT_CHECK_TIMEOUT_SECS);
    if timeout_secs == 0 || timeout_secs > MAX_CHECK_TIMEOUT_SECS {
        return Err(TaskError::field(
            at("timeout_secs"),
            format!("must be between 1 and {MAX_CHECK_TIMEOUT_SECS}"),
        ));
    }
    Ok(Criterion {
        id: id.to_string(),
        description: a.description.trim().to_string(),
        check,
        blocking,
        timeout_secs,
        source: a.source.unwrap_or_default(),
        clause,
    })
}

/// Validate `protected_paths` entries; errors name `{field}[i]`.
pub(crate) fn validate_protected_paths(
    items: &[String],
    field: &str,
) -> Result<Vec<String>, TaskError> {
    let mut protected_paths = Vec::new();
    for (i, p) in items.iter().enumerate() {
        let p = p.trim();
        let bare = p.trim_end_matches('/');
        if loopgate_protocol::snapshot::validate_relative_path(bare).is_err() {
            return Err(TaskError::field(
                format!("{field}[{i}]"),
                "must be a relative path inside the workspace",
            ));
        }
        if !protected_paths.iter().any(|q: &String| q == p) {
            protected_paths.push(p.to_string());
        }
    }
    Ok(protected_paths)
}

/// Validate `writable_paths` entries like protected paths; errors name `writable_paths[i]`.
/// An entry may not also be one of the task's `protected_paths` (which would say both), nor
/// `*` or `.` (every protection lifted at once).
fn validate_writable_paths(
    items: &[String],
    protected_paths: &[String],
) -> Result<Vec<String>, TaskError> {
    for (i, p) in items.iter().enumerate() {
        let p = p.trim();
        if p == "*" || p == "." {
            return Err(TaskError::field(
                format!("writable_paths[{i}]"),
                "name the files or directories the work may change, not the whole workspace",
            ));
        }
        if protected_paths.iter().any(|q| q == p) {
            return Err(TaskError::field(
                format!("writable_paths[{i}]"),
                format!("'{p}' is also in protected_paths: say one or the other"),
            ));
        }
    }
    validate_protected_paths(items, "writable_paths")
}

/// Validate `[[rubric]]` + `rubric_threshold` into a rubric (`None` when no dimension is given).
pub(crate) fn validate_rubric(
    dimensions: &[RubricDimension],
    threshold: Option<f64>,
) -> Result<Option<Rubric>, TaskError> {
    if dimensions.is_empty() {
        return match threshold {
            Some(_) => Err(TaskError::field(
                "rubric_threshold",
                "is set but there is no [[rubric]] dimension",
            )),
            None => Ok(None),
        };
    }
    let rubric = Rubric {
        dimensions: dimensions
            .iter()
            .map(|d| RubricDimension {
                name: d.name.trim().to_string(),
                weight: d.weight,
                description: d.description.trim().to_string(),
            })
            .collect(),
        threshold: threshold.unwrap_or(DEFAULT_RUBRIC_THRESHOLD),
    };
    rubric.validate().map_err(|e| {
        let field = match e {
            loopgate_protocol::rubric::RubricError::InvalidThreshold { .. } => "rubric_threshold",
            _ => "rubric",
        };
        TaskError::field(field, e.to_string())
    })?;
    Ok(Some(rubric))
}

/// Parse and validate a task file's TOML text.
pub fn parse_task_toml(text: &str) -> Result<Task, TaskError> {
    parse_task_file_toml(text)?.validate()
}

/// Parse the raw task file (no validation) from TOML text.
pub fn parse_task_file_toml(text: &str) -> Result<TaskFile, TaskError> {
    toml::from_str::<TaskFile>(text)
        .map_err(|e| TaskError::Syntax(e.to_string().trim().to_string()))
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
