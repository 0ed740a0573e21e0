//! Per-agent command lines and the prompt a CLI agent gets. Pure.

use loopgate_protocol::wire::ExecRequest;

use crate::agents::config::{AgentKind, AgentProfile};
use crate::prompt::task::task_prompt;
use crate::prompt::template::text;

/// The increment as a prompt for an agent with its own tools and loop.
pub(crate) fn agent_prompt(req: &ExecRequest, files: &[String]) -> String {
    let mut prompt = format!("{}\n\n", text(include_str!("agent_prompt.md")));
    // An agent with its own tools reads the files it needs.
    prompt.push_str(&task_prompt(req, files, &[]));
    if !req.increment.write_scope.is_empty() {
        prompt.push_str(&format!(
            "Only change these paths: {}\n",
            req.increment.write_scope.join(", ")
        ));
    }
    prompt
}

/// True when `args` already holds one of `flags` (as `--flag` or `--flag=value`).
fn has_any(args: &[String], flags: &[&str]) -> bool {
    args.iter().any(|arg| {
        flags
            .iter()
            .any(|flag| arg == flag || arg.starts_with(&format!("{flag}=")))
    })
}

/// The arguments after the command: the kind's fixed flags, a default permission mode unless
/// the profile's `args` choose one, `--model`, the profile's `args`, then the prompt.
pub(crate) fn agent_args(profile: &AgentProfile, prompt: &str) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let extra = &profile.args;
    match profile.kind {
        AgentKind::ClaudeCode => {
            args.extend(["-p", "--output-format", "stream-json", "--verbose"].map(String::from));
            let chooses = [
                "--permission-mode",
                "--dangerously-skip-permissions",
                "--allowedTools",
                "--allowed-tools",
            ];
            if !has_any(extra, &chooses) {
                // Edits without asking (there is nobody to ask); shell commands need an explicit
                // `--allowedTools` or `--permission-mode` in the profile's args.
                args.extend(["--permission-mode", "acceptEdits"].map(String::from));
            }
        }
        AgentKind::Codex => {
            args.extend(["exec", "--json", "--skip-git-repo-check"].map(String::from));
            let chooses = [
                "--sandbox",
                "-s",
                "--full-auto",
                "--dangerously-bypass-approvals-and-sandbox",
            ];
            if !has_any(extra, &chooses) {
                args.extend(["--sandbox", "workspace-write"].map(String::from));
            }
        }
        AgentKind::OpenCode => {
            args.extend(["run", "--format", "json"].map(String::from));
        }
    }
    if let Some(model) = &profile.model {
        args.extend(["--model".to_string(), model.clone()]);
    }
    args.extend(extra.iter().cloned());
    // A prompt starting with '-' must not be read as a flag.
    if prompt.starts_with('-') {
        args.push("--".to_string());
    }
    args.push(prompt.to_string());
    args
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::path::PathBuf;

    fn profile(kind: AgentKind, model: Option<&str>, args: &[&str]) -> AgentProfile {
        AgentProfile {
            name: "a".into(),
            kind,
            command: PathBuf::from(kind.default_command()),
            model: model.map(str::to_string),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
        }
    }

    #[test]
    fn args_table() {
        let cases: Vec<(AgentProfile, &str, &str)> = vec![
            (
                profile(AgentKind::ClaudeCode, None, &[]),
                "fix it",
                "-p --output-format stream-json --verbose --permission-mode acceptEdits fix it",
            ),
            (
                profile(AgentKind::ClaudeCode, Some("sonnet"), &["--permission-mode", "bypassPermissions"]),
                "fix it",
                "-p --output-format stream-json --verbose --model sonnet --permission-mode bypassPermissions fix it",
            ),
            (
                profile(AgentKind::Codex, Some("qwen"), &["-c", "model_provider=\"local\""]),
                "fix it",
                "exec --json --skip-git-repo-check --sandbox workspace-write --model qwen -c model_provider=\"local\" fix it",
            ),
            (
                profile(AgentKind::Codex, None, &["--dangerously-bypass-approvals-and-sandbox"]),
                "-x",
                "exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -- -x",
            ),
            (
                profile(AgentKind::OpenCode, Some("local/qwen"), &[]),
                "fix it",
                "run --format json --model local/qwen fix it",
            ),
        ];
        for (profile, prompt, want) in cases {
            assert_eq!(
                agent_args(&profile, prompt).join(" "),
                want,
                "{:?}",
                profile.kind
            );
        }
    }

    #[test]
    fn prompt_carries_the_increment_and_scope() {
        let req: ExecRequest = serde_json::from_value(serde_json::json!({
            "run_id": "r", "generation": 1, "round": 1, "capability": "cli",
            "contract": {"goal": "say hello", "criteria": [], "protected_paths": [], "spec_hash": "h"},
            "increment": {"objective": "write hello.py", "write_scope": ["hello.py"]},
            "base_snapshot": "b", "executor_profile": "codex", "episode_secs": 5, "max_steps": 3
        }))
        .unwrap();
        let prompt = agent_prompt(&req, &["README.md".into()]);
        assert!(prompt.contains("Goal: say hello"), "{prompt}");
        assert!(prompt.contains("Your step: write hello.py"), "{prompt}");
        assert!(prompt.contains("README.md"), "{prompt}");
        assert!(
            prompt.contains("Only change these paths: hello.py"),
            "{prompt}"
        );
    }
}
