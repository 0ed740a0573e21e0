//! A proposed contract: what the proposer episode writes into `contract.toml` (or a person hands
//! to `loopgate approve RUN --edit FILE`). It holds acceptance criteria, protected paths and an
//! optional rubric; the goal is always the task's own. Validated against the task into a
//! [`Contract`] with its spec hash, which is then frozen for the rest of the run.

use serde::Deserialize;

use crate::task::{
    validate_criteria, validate_protected_paths, validate_rubric, AcceptanceFile, Task, TaskError,
};
use loopgate_protocol::contract::Contract;
use loopgate_protocol::rubric::RubricDimension;

/// The planner's product-context and design document, written before any code.
pub const SPEC_FILE: &str = "spec.md";
/// The proposer's contract, read from the frozen snapshot by the auditor.
pub const PROPOSAL_FILE: &str = "contract.toml";
/// A larger proposal is refused unread.
pub const MAX_PROPOSAL_BYTES: usize = 64 * 1024;

/// The proposal file as written (TOML, or the same shape in JSON). Unknown keys are errors.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractFile {
    #[serde(default)]
    pub acceptance: Vec<AcceptanceFile>,
    #[serde(default)]
    pub protected_paths: Vec<String>,
    #[serde(default)]
    pub rubric: Vec<RubricDimension>,
    #[serde(default, alias = "threshold")]
    pub rubric_threshold: Option<f64>,
}

/// Strip one surrounding markdown fence (```` ```toml ... ``` ````), which models like to add.
fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// Parse the proposal text (no validation).
pub fn parse_contract_file(text: &str) -> Result<ContractFile, TaskError> {
    if text.len() > MAX_PROPOSAL_BYTES {
        return Err(TaskError::Syntax(format!(
            "the contract file is {} bytes; at most {MAX_PROPOSAL_BYTES} are read",
            text.len()
        )));
    }
    let body = unfenced(text);
    if body.is_empty() {
        return Err(TaskError::Syntax("the contract file is empty".to_string()));
    }
    if body.starts_with('{') {
        serde_json::from_str(body).map_err(|e| TaskError::Syntax(format!("invalid JSON: {e}")))
    } else {
        toml::from_str(body).map_err(|e| TaskError::Syntax(e.to_string().trim().to_string()))
    }
}

/// The proposal's own criteria, validated (what the auditor runs once on the proposal snapshot,
/// before any work, to show the contract is not already satisfied).
pub fn proposal_criteria(
    text: &str,
) -> Result<Vec<loopgate_protocol::contract::Criterion>, TaskError> {
    validate_criteria(&parse_contract_file(text)?.acceptance, "acceptance")
}

/// The contract a proposal makes for `task`: the task's goal and criteria, then the proposal's
/// criteria (an id the task already uses is skipped: the user's criterion wins), protected
/// paths from both plus `spec.md` and `contract.toml` (the plan cannot be edited once frozen),
/// and the task's rubric, or else the proposal's. At least one blocking criterion (which always
/// has a check) is required, so a contract can never be vacuous.
pub fn contract_from_proposal(text: &str, task: &Task) -> Result<Contract, TaskError> {
    let file = parse_contract_file(text)?;
    let proposed = validate_criteria(&file.acceptance, "acceptance")?;
    let mut criteria = task.acceptance.clone();
    for mut c in proposed {
        // The proposer's criterion for a goal clause is a derived one (its check may be found
        // broken later; its clause is then judged).
        if c.clause.is_some() && task.derive_criteria {
            c.source = loopgate_protocol::contract::CriterionSource::Goal;
        }
        if !criteria.iter().any(|k| k.id == c.id) {
            criteria.push(c);
        }
    }
    let mut protected = task.protected_paths.clone();
    protected.extend(validate_protected_paths(
        &file.protected_paths,
        "protected_paths",
    )?);
    protected.extend([SPEC_FILE.to_string(), PROPOSAL_FILE.to_string()]);
    if crate::goal::criteria::derives(task) {
        protected.extend(crate::goal::criteria::goal_kept_paths(&task.goal));
    }
    let mut protected_paths: Vec<String> = Vec::with_capacity(protected.len());
    for p in protected {
        if !protected_paths.contains(&p) {
            protected_paths.push(p);
        }
    }
    if crate::goal::criteria::derives(task) {
        let derived =
            crate::goal::criteria::derive_goal_criteria(&task.goal, &criteria, &protected_paths);
        criteria.extend(derived);
    } else if let Some(c) = criteria.iter().find(|c| c.blocking && c.check.is_none()) {
        return Err(TaskError::Invalid {
            field: "acceptance".to_string(),
            problem: format!(
                "criterion '{}' is blocking without a check, and this task has no judge model \
                 (roles.auditor) to judge its clause: give it a check or set blocking = false",
                c.id
            ),
        });
    }
    if !criteria.iter().any(|c| c.blocking && c.check.is_some()) {
        return Err(TaskError::Invalid {
            field: "acceptance".to_string(),
            problem: "the contract needs at least one blocking criterion with a check command"
                .to_string(),
        });
    }
    if criteria.len() > crate::task::MAX_CRITERIA {
        return Err(TaskError::Invalid {
            field: "acceptance".to_string(),
            problem: format!("at most {} criteria in all", crate::task::MAX_CRITERIA),
        });
    }
    let proposed_rubric = validate_rubric(&file.rubric, file.rubric_threshold)?;
    let rubric = match (&task.rubric, proposed_rubric) {
        (Some(own), _) => Some(own.clone()),
        (None, Some(_)) if task.roles.auditor.is_none() => {
            return Err(TaskError::Invalid {
                field: "rubric".to_string(),
                problem: "this task has no judge model (roles.auditor); leave [[rubric]] out"
                    .to_string(),
            })
        }
        (None, proposed) => proposed,
    };
    let mut contract = Contract {
        goal: task.goal.clone(),
        criteria,
        protected_paths,
        rubric,
        // The task author's only: a proposal cannot lift a protection.
        writable_paths: task.writable_paths.clone(),
        spec_hash: String::new(),
    };
    contract.spec_hash = contract.compute_hash();
    Ok(contract)
}

/// The contract as a proposal file (what `loopgate contract RUN` prints, ready for `--edit`).
pub fn contract_to_toml(contract: &Contract) -> String {
    use std::fmt::Write as _;
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = String::new();
    let _ = writeln!(out, "# spec {}", contract.spec_hash);
    let _ = writeln!(out, "# goal: {}", contract.goal.replace('\n', " "));
    let coverage = crate::goal::criteria::clause_coverage(
        &contract.goal,
        &contract.criteria,
        &contract.protected_paths,
    );
    if !coverage.is_empty() {
        let _ = writeln!(
            out,
            "# goal clauses (each checked or judged by the criterion named):"
        );
        for cover in &coverage {
            use crate::goal::criteria::ClauseCover;
            let by = match &cover.cover {
                ClauseCover::Criterion(id) => format!("-> {id}"),
                ClauseCover::ProtectedPaths(paths) => {
                    format!("-> protected_paths ({})", paths.join(", "))
                }
                ClauseCover::StatesProblem => {
                    "(states the problem the task fixes; not a criterion)".to_string()
                }
                ClauseCover::Uncovered => "(no criterion covers it)".to_string(),
            };
            let _ = writeln!(out, "#   \"{}\" {by}", cover.clause.replace('\n', " "));
        }
    }
    if !contract.writable_paths.is_empty() {
        // The task's own (a proposal cannot give them): shown, not part of the file.
        let _ = writeln!(
            out,
            "# writable_paths (from the task): {}",
            contract.writable_paths.join(", ")
        );
    }
    let paths: Vec<String> = contract.protected_paths.iter().map(|p| q(p)).collect();
    let _ = writeln!(out, "protected_paths = [{}]", paths.join(", "));
    if let Some(r) = &contract.rubric {
        let _ = writeln!(out, "rubric_threshold = {}", r.threshold);
    }
    for c in &contract.criteria {
        let _ = writeln!(out, "\n[[acceptance]]\nid = {}", q(&c.id));
        let _ = writeln!(out, "description = {}", q(&c.description));
        if let Some(check) = &c.check {
            let _ = writeln!(out, "check = {}", q(check));
        }
        let _ = writeln!(out, "blocking = {}", c.blocking);
        let _ = writeln!(out, "timeout_secs = {}", c.timeout_secs);
        if c.source == loopgate_protocol::contract::CriterionSource::Goal {
            let _ = writeln!(out, "source = \"goal\"");
        }
        if let Some(clause) = &c.clause {
            let _ = writeln!(out, "clause = {}", q(clause));
        }
    }
    if let Some(r) = &contract.rubric {
        for d in &r.dimensions {
            let _ = writeln!(out, "\n[[rubric]]\nname = {}", q(&d.name));
            let _ = writeln!(out, "weight = {}", d.weight);
            let _ = writeln!(out, "description = {}", q(&d.description));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::parse_task_toml;

    fn planned_task(extra: &str) -> Task {
        parse_task_toml(&format!("goal = \"make a greeter\"\nplan = true\n{extra}")).unwrap()
    }

    const GOOD: &str = r#"
protected_paths = ["tests/"]
[[acceptance]]
id = "prints"
description = "prints hello"
check = "python3 hello.py | grep -q hello"
[[acceptance]]
id = "style"
description = "reads well"
blocking = false
"#;

    #[test]
    fn a_good_proposal_becomes_a_hashed_contract() {
        let task = planned_task("");
        let c = contract_from_proposal(GOOD, &task).unwrap();
        assert_eq!(c.goal, "make a greeter");
        assert_eq!(c.criteria.len(), 2);
        assert!(c.criteria[0].blocking && !c.criteria[1].blocking);
        assert_eq!(c.protected_paths, vec!["tests/", SPEC_FILE, PROPOSAL_FILE]);
        assert!(c.is_intact());
        assert_eq!(c.spec_hash.len(), 64);
        // The printed contract parses back to the same contract.
        let again = contract_from_proposal(&contract_to_toml(&c), &task).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn only_the_task_names_writable_paths() {
        let task = planned_task("writable_paths = [\"conftest.py\"]");
        let c = contract_from_proposal(GOOD, &task).unwrap();
        assert_eq!(c.writable_paths, vec!["conftest.py"]);
        let printed = contract_to_toml(&c);
        assert!(printed.contains("# writable_paths (from the task): conftest.py"));
        assert_eq!(contract_from_proposal(&printed, &task).unwrap(), c);
        // A proposer cannot lift a protection: the key is unknown to a proposal.
        let lifted = format!("writable_paths = [\"pytest.ini\"]\n{GOOD}");
        assert!(matches!(
            contract_from_proposal(&lifted, &task),
            Err(TaskError::Syntax(_))
        ));
    }

    #[test]
    fn fenced_and_json_proposals_parse() {
        let task = planned_task("");
        let fenced = format!("```toml\n{GOOD}\n```\n");
        assert_eq!(
            contract_from_proposal(&fenced, &task)
                .unwrap()
                .criteria
                .len(),
            2
        );
        let json = r#"{"acceptance": [{"id": "a", "check": "true"}]}"#;
        assert_eq!(
            contract_from_proposal(json, &task).unwrap().criteria.len(),
            1
        );
    }

    #[test]
    fn the_tasks_own_criteria_and_rubric_win() {
        let task = planned_task(
            "derive_criteria = false\n[[acceptance]]\nid = \"prints\"\ncheck = \"true\"\n[roles]\nauditor = \"judge\"\n[[rubric]]\nname = \"clarity\"\n",
        );
        let c = contract_from_proposal(&format!("{GOOD}\n[[rubric]]\nname = \"other\"\n"), &task)
            .unwrap();
        assert_eq!(c.criteria[0].check.as_deref(), Some("true"));
        assert_eq!(c.criteria.len(), 2);
        assert_eq!(c.rubric.unwrap().dimensions[0].name, "clarity");
    }

    #[test]
    fn bad_proposals_name_the_problem() {
        let task = planned_task("");
        let cases: &[(&str, Option<&str>)] = &[
            ("", None),
            ("not toml at all [[[", None),
            ("goal = \"changed\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"", None),
            ("[[acceptance]]\nid=\"a\"", Some("acceptance[0].check")),
            ("[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"", Some("acceptance[1].id")),
            ("[[acceptance]]\nid=\"rubric\"\ncheck=\"true\"", Some("acceptance[0].id")),
            ("[[acceptance]]\nid=\"a\"\nblocking=false", Some("acceptance")),
            ("acceptance = []", Some("acceptance")),
            ("protected_paths=[\"../x\"]\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"", Some("protected_paths[0]")),
            ("[[acceptance]]\nid=\"a\"\ncheck=\"true\"\n[[rubric]]\nname=\"q\"", Some("rubric")),
            ("rubric_threshold = 9\n[[acceptance]]\nid=\"a\"\ncheck=\"true\"", Some("rubric_threshold")),
        ];
        for (text, field) in cases {
            let err = contract_from_proposal(text, &task).unwrap_err();
            assert_eq!(err.field_name(), *field, "{text:?}: {err}");
        }
        let huge = "#".repeat(MAX_PROPOSAL_BYTES + 1);
        assert!(matches!(
            contract_from_proposal(&huge, &task),
            Err(TaskError::Syntax(_))
        ));
    }
}
