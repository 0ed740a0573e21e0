//! Budget keys the bench adds to a task file only when this build of loopgate knows them
//! (task files refuse unknown keys), so one bench works before and after a key lands.

use loopgate_common::task::parse_task_file_toml;

#[derive(Debug, thiserror::Error)]
pub enum TaskTomlError {
    #[error("task TOML does not parse: {0}")]
    Parse(String),
    #[error("task TOML: `budget` is not a table")]
    BudgetNotATable,
    #[error("task TOML does not serialize: {0}")]
    Serialize(String),
}

/// Does this build's task file accept `[budget] <key> = <value>`? Asked of the very parser the
/// manager validates submissions with (the bench and the daemons are built from one tree).
pub fn budget_accepts(key: &str, value: i64) -> bool {
    parse_task_file_toml(&format!("goal = \"probe\"\n[budget]\n{key} = {value}\n")).is_ok()
}

/// Does this build's task file accept `[budget] <key> = <true|false>`?
pub fn budget_accepts_bool(key: &str, value: bool) -> bool {
    parse_task_file_toml(&format!("goal = \"probe\"\n[budget]\n{key} = {value}\n")).is_ok()
}

/// `toml_text` with `[budget] <key> = <value>` set (the table is created when absent).
pub fn with_budget_key(toml_text: &str, key: &str, value: i64) -> Result<String, TaskTomlError> {
    with_budget_value(toml_text, key, toml::Value::Integer(value))
}

/// `toml_text` with `[budget] <key> = <true|false>` set.
pub fn with_budget_bool(toml_text: &str, key: &str, value: bool) -> Result<String, TaskTomlError> {
    with_budget_value(toml_text, key, toml::Value::Boolean(value))
}

fn with_budget_value(
    toml_text: &str,
    key: &str,
    value: toml::Value,
) -> Result<String, TaskTomlError> {
    let mut doc: toml::Table =
        toml::from_str(toml_text).map_err(|e| TaskTomlError::Parse(e.to_string()))?;
    let budget = doc
        .entry("budget")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(budget) = budget else {
        return Err(TaskTomlError::BudgetNotATable);
    };
    budget.insert(key.to_string(), value);
    toml::to_string(&doc).map_err(|e| TaskTomlError::Serialize(e.to_string()))
}

/// The single-shot arm's extra budget keys: `self_checks = 0` (no check inside the episode)
/// where the daemons know the key, else none. Returns the task text and what was done, for the
/// report's notes.
pub fn single_shot_budget(toml_text: &str) -> Result<(String, &'static str), TaskTomlError> {
    if budget_accepts("self_checks", 0) {
        Ok((
            with_budget_key(toml_text, "self_checks", 0)?,
            "self_checks = 0 (the executor's in-episode self-check is off)",
        ))
    } else {
        Ok((
            toml_text.to_string(),
            "no self_checks key in this build (the executor has no in-episode self-check)",
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn budget_key_is_set_with_or_without_a_budget_table() {
        let cases: &[(&str, &str)] = &[
            ("goal = \"g\"\n", "[budget]\nself_checks = 0\n"),
            (
                "goal = \"g\"\n[budget]\nmax_rounds = 1\n",
                "[budget]\nmax_rounds = 1\nself_checks = 0\n",
            ),
            (
                "goal = \"g\"\n[budget]\nself_checks = 2\n",
                "[budget]\nself_checks = 0\n",
            ),
        ];
        for (input, want) in cases {
            let out = with_budget_key(input, "self_checks", 0).unwrap();
            assert!(out.contains(want), "{input} -> {out}");
            assert!(out.starts_with("goal = \"g\"\n"), "{out}");
        }
        assert!(matches!(
            with_budget_key("budget = 3\n", "self_checks", 0),
            Err(TaskTomlError::BudgetNotATable)
        ));
        assert!(matches!(
            with_budget_key("not toml [", "self_checks", 0),
            Err(TaskTomlError::Parse(_))
        ));
    }

    #[test]
    fn known_and_unknown_budget_keys() {
        assert!(budget_accepts("max_rounds", 1));
        assert!(!budget_accepts("no_such_key_anywhere", 0));
        assert!(budget_accepts_bool("rollback_regressions", false));
        assert!(!budget_accepts_bool("max_rounds", false), "a number key");
        let text = with_budget_bool("goal = \"g\"\n", "rollback_regressions", false).unwrap();
        assert!(text.contains("rollback_regressions = false"), "{text}");
        assert!(parse_task_file_toml(&text).is_ok(), "{text}");
        let (text, note) = single_shot_budget("goal = \"g\"\n").unwrap();
        // Whichever this build is, the text it sends is one the parser accepts.
        assert!(parse_task_file_toml(&text).is_ok(), "{note}: {text}");
        assert_eq!(
            text.contains("self_checks"),
            budget_accepts("self_checks", 0)
        );
    }
}
