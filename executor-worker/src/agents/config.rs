//! `[agents.NAME]` tables of executor.toml: external CLI agents (Claude Code, Codex CLI,
//! OpenCode) a task's `roles.executor` may name instead of a model profile.

use std::collections::BTreeMap;
use std::path::PathBuf;

use loopgate_common::config::ConfigError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentKind {
    /// Claude Code: `claude -p --output-format stream-json --verbose <prompt>`.
    #[serde(rename = "claude_code")]
    ClaudeCode,
    /// Codex CLI: `codex exec --json --skip-git-repo-check <prompt>`.
    #[serde(rename = "codex")]
    Codex,
    /// OpenCode: `opencode run --format json <prompt>`.
    #[serde(rename = "opencode")]
    OpenCode,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "claude_code",
            AgentKind::Codex => "codex",
            AgentKind::OpenCode => "opencode",
        }
    }

    /// The executable looked up in `PATH` when the profile names no `command`.
    pub fn default_command(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "claude",
            AgentKind::Codex => "codex",
            AgentKind::OpenCode => "opencode",
        }
    }
}

/// One `[agents.NAME]` table as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProfileConfig {
    pub kind: AgentKind,
    /// Path or name of the executable; default per kind (`claude`, `codex`, `opencode`).
    #[serde(default)]
    pub command: Option<PathBuf>,
    /// Passed as the agent's `--model` (`provider/model` for OpenCode).
    #[serde(default)]
    pub model: Option<String>,
    /// Extra arguments, placed before the prompt.
    #[serde(default)]
    pub args: Vec<String>,
    /// Names of worker environment variables passed through to the agent (e.g. its API key).
    /// The agent otherwise gets only PATH, LANG and a HOME of its own. Unset ones are skipped.
    #[serde(default)]
    pub env: Vec<String>,
    /// Fixed environment values for the agent (not secrets: they are in the config file),
    /// e.g. `OPENCODE_CONFIG_CONTENT`.
    #[serde(default)]
    pub set_env: BTreeMap<String, String>,
}

/// A resolved agent profile.
#[derive(Clone, PartialEq, Eq)]
pub struct AgentProfile {
    pub name: String,
    pub kind: AgentKind,
    pub command: PathBuf,
    pub model: Option<String>,
    pub args: Vec<String>,
    /// Variables the agent gets on top of PATH, LANG and HOME (values may be secrets).
    pub env: Vec<(String, String)>,
}

impl std::fmt::Debug for AgentProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("AgentProfile")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("command", &self.command)
            .field("model", &self.model)
            .field("args", &self.args)
            .field("env", &names)
            .finish()
    }
}

/// Names the agent's environment may not override: the harness sets them.
const RESERVED_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl AgentProfileConfig {
    /// Validates the table and reads the passed-through variables from `env`.
    pub fn resolve(
        &self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<AgentProfile, ConfigError> {
        let field = |f: &str| format!("agents.{name}.{f}");
        let command = self
            .command
            .clone()
            .unwrap_or_else(|| PathBuf::from(self.kind.default_command()));
        if command.as_os_str().is_empty() {
            return Err(ConfigError::invalid(field("command"), "must not be empty"));
        }
        if self.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err(ConfigError::invalid(field("model"), "must not be empty"));
        }
        let mut vars = Vec::new();
        for var in &self.env {
            if !valid_env_name(var) || RESERVED_ENV.contains(&var.as_str()) {
                return Err(ConfigError::invalid(
                    field("env"),
                    format!("`{var}` is not a variable name the agent may receive"),
                ));
            }
            if let Some(value) = env(var) {
                vars.push((var.clone(), value));
            }
        }
        for (var, value) in &self.set_env {
            if !valid_env_name(var) || RESERVED_ENV.contains(&var.as_str()) {
                return Err(ConfigError::invalid(
                    field("set_env"),
                    format!("`{var}` is not a variable name the agent may receive"),
                ));
            }
            vars.retain(|(k, _)| k != var);
            vars.push((var.clone(), value.clone()));
        }
        Ok(AgentProfile {
            name: name.to_string(),
            kind: self.kind,
            command,
            model: self.model.clone(),
            args: self.args.clone(),
            env: vars,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn parse(text: &str) -> Result<AgentProfileConfig, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn resolve_table() {
        let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "sk-ant".to_string());
        type Want<'a> = Result<(&'a str, usize), &'a str>;
        let cases: Vec<(&str, Want)> = vec![
            ("kind = \"claude_code\"", Ok(("claude", 0))),
            (
                "kind = \"codex\"\ncommand = \"/opt/codex/bin/codex\"",
                Ok(("/opt/codex/bin/codex", 0)),
            ),
            (
                "kind = \"opencode\"\nenv = [\"ANTHROPIC_API_KEY\", \"UNSET_ONE\"]",
                Ok(("opencode", 1)),
            ),
            (
                "kind = \"opencode\"\nset_env = { OPENCODE_CONFIG_CONTENT = \"{}\" }",
                Ok(("opencode", 1)),
            ),
            ("kind = \"codex\"\nenv = [\"PATH\"]", Err("agents.a.env")),
            ("kind = \"codex\"\nenv = [\"A=B\"]", Err("agents.a.env")),
            (
                "kind = \"codex\"\nset_env = { HOME = \"/\" }",
                Err("agents.a.set_env"),
            ),
            ("kind = \"codex\"\ncommand = \"\"", Err("agents.a.command")),
            ("kind = \"codex\"\nmodel = \" \"", Err("agents.a.model")),
        ];
        for (text, want) in cases {
            let got = parse(text).unwrap().resolve("a", &env);
            match (got, want) {
                (Ok(profile), Ok((command, vars))) => {
                    assert_eq!(profile.command, PathBuf::from(command), "{text}");
                    assert_eq!(profile.env.len(), vars, "{text}");
                }
                (Err(err), Err(field)) => assert!(err.to_string().contains(field), "{text}: {err}"),
                (got, want) => panic!("{text}: {got:?} vs {want:?}"),
            }
        }
    }

    #[test]
    fn parse_errors_and_debug_hides_values() {
        assert!(parse("kind = \"aider\"").is_err());
        assert!(parse("kind = \"codex\"\nbogus = 1").is_err());
        assert!(parse("command = \"x\"").is_err());
        let profile = parse("kind = \"claude_code\"\nenv = [\"ANTHROPIC_API_KEY\"]")
            .unwrap()
            .resolve("c", &|_| Some("sk-secret".into()))
            .unwrap();
        let shown = format!("{profile:?}");
        assert!(
            shown.contains("ANTHROPIC_API_KEY") && !shown.contains("sk-secret"),
            "{shown}"
        );
    }
}
