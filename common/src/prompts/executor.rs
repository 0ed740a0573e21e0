//! The executor's prompt: the contract and the increment, never the manager's reasoning.

use crate::wire::{EpisodeKind, ExecRequest};

pub const SYSTEM: &str = "You are a coding agent working inside a workspace directory. \
Do exactly the step you are given, using the tools: write_file, read_file, edit_file, list_dir, \
shell, finish. Paths are relative to the workspace. Write complete file contents. \
When the step is done, call finish with a one-line summary. Do not edit acceptance tests \
and do not hard-code expected output.";

/// The first user message of an episode. `files` lists the workspace's paths.
pub fn task_prompt(req: &ExecRequest, files: &[String]) -> String {
    let mut s = String::new();
    s.push_str(&format!("Goal: {}\n\n", req.contract.goal));
    match req.episode {
        EpisodeKind::Step => s.push_str(&format!(
            "Acceptance checks of contract spec {} (frozen; run by an independent auditor after you finish):\n",
            req.contract.short_hash()
        )),
        EpisodeKind::Plan | EpisodeKind::Propose => {
            s.push_str("You are planning: there is no contract yet, and no code is written in this step.\n")
        }
    }
    for c in &req.contract.criteria {
        match &c.check {
            Some(check) => s.push_str(&format!(
                "- {}: {} (check: `{}`)\n",
                c.id, c.description, check
            )),
            None => s.push_str(&format!("- {}: {}\n", c.id, c.description)),
        }
    }
    if !req.contract.protected_paths.is_empty() {
        s.push_str(&format!(
            "Do not change: {}\n",
            req.contract.protected_paths.join(", ")
        ));
    }
    s.push_str("\nWorkspace files: ");
    if files.is_empty() {
        s.push_str("(empty)\n");
    } else {
        let shown: Vec<&str> = files.iter().take(60).map(String::as_str).collect();
        s.push_str(&shown.join(", "));
        if files.len() > shown.len() {
            s.push_str(&format!(" … and {} more", files.len() - shown.len()));
        }
        s.push('\n');
    }
    s.push_str(&format!("\nYour step: {}\n", req.increment.objective));
    if !req.increment.write_scope.is_empty() {
        s.push_str(&format!(
            "You may only create or change: {}\n",
            req.increment.write_scope.join(", ")
        ));
    }
    if !req.increment.instructions.is_empty()
        && req.increment.instructions != req.increment.objective
    {
        s.push_str(&format!("{}\n", req.increment.instructions));
    }
    s
}
