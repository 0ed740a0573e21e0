//! The first user message of an episode: the contract, the goal's own words for the step,
//! what the last audit found on the workspace, and the increment. Never the manager's
//! reasoning.

use loopgate_protocol::wire::{EpisodeKind, ExecFeedback, ExecRequest, FailingCheck};

use crate::prompt::path_hints::missing_path_hints;
use crate::prompt::previews::{withheld_previews, FilePreview};
use crate::prompt::template::{fill, text};

/// Workspace paths listed in the prompt.
const FILES_SHOWN: usize = 60;
/// Changed paths listed in the prompt.
const CHANGED_SHOWN: usize = 20;

/// The first user message of an episode. `files` lists the workspace's paths; `previews`
/// are the current contents of the few files `preview_paths` chose.
pub(crate) fn task_prompt(req: &ExecRequest, files: &[String], previews: &[FilePreview]) -> String {
    let mut s = String::new();
    let part = step_part(req);
    match part {
        Some(_) => s.push_str(&format!(
            "Goal: {}\n(One part of a larger task; the other parts are later steps, not this \
             episode's work.)\n\n",
            req.increment.goal_clauses.join(" ")
        )),
        None => s.push_str(&format!("Goal: {}\n\n", req.contract.goal)),
    }
    let shown = |id: &str| part.is_none_or(|targets| targets.iter().any(|t| t == id));
    match req.episode {
        EpisodeKind::Step if req.self_checks > 0 => {
            let spec = req.contract.short_hash();
            s.push_str(&fill(
                include_str!("checks_self_checked.md"),
                &[("spec", spec)],
            ));
            s.push('\n');
        }
        EpisodeKind::Step => {
            let spec = req.contract.short_hash();
            s.push_str(&fill(include_str!("checks_audited.md"), &[("spec", spec)]));
            s.push('\n');
        }
        EpisodeKind::Plan | EpisodeKind::Propose => {
            s.push_str(text(include_str!("planning.md")));
            s.push('\n');
        }
    }
    for c in req.contract.criteria.iter().filter(|c| shown(&c.id)) {
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
    push_files(&mut s, files);
    push_previews(&mut s, previews);
    push_feedback(&mut s, &req.feedback, files, &shown, part.is_some());
    let clauses = &req.increment.goal_clauses;
    if clauses.is_empty() {
        s.push_str(&format!("\nYour step: {}\n", req.increment.objective));
    } else {
        // The goal's own words are the step: small models follow them where a paraphrase
        // loses exact names and formats.
        let step = clauses.join(" ");
        s.push_str(&format!("\nYour step: {step}\n"));
        // Compared word by word: a manager's reply parser collapses runs of spaces, and a
        // note that only re-spaces the goal's words would repeat them (and read as a change).
        if !req
            .increment
            .objective
            .split_whitespace()
            .eq(step.split_whitespace())
        {
            s.push_str(&fill(
                include_str!("manager_note.md"),
                &[("note", &req.increment.objective)],
            ));
            s.push('\n');
        }
    }
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

fn push_files(s: &mut String, files: &[String]) {
    if files.is_empty() {
        s.push_str("\nWorkspace files: (empty)\n");
        return;
    }
    s.push_str(
        "\nWorkspace files (exact paths, relative to the workspace root; use them as written):\n",
    );
    for f in files.iter().take(FILES_SHOWN) {
        s.push_str(&format!("- {f}\n"));
    }
    if files.len() > FILES_SHOWN {
        s.push_str(&format!("… and {} more\n", files.len() - FILES_SHOWN));
    }
}

fn push_previews(s: &mut String, previews: &[FilePreview]) {
    for p in previews {
        s.push_str(&format!("\nCurrent contents of {}:\n```\n", p.path));
        s.push_str(&p.text);
        if !p.text.ends_with('\n') {
            s.push('\n');
        }
        s.push_str("```\n");
    }
}

/// The criteria a step of a part of the goal targets: `Some` when the increment carries goal
/// clauses and targets only some of the contract's criteria (the clause policy's step: its
/// clause and the earlier clauses it must keep passing). Its episode is shown that part of the
/// goal, those criteria and their failing evidence only, as a task of that size would be.
fn step_part(req: &ExecRequest) -> Option<&[String]> {
    let targets = &req.increment.acceptance_checks;
    let partial = !targets.is_empty()
        && req
            .contract
            .criteria
            .iter()
            .any(|c| !targets.contains(&c.id));
    (partial && !req.increment.goal_clauses.is_empty()).then_some(targets.as_slice())
}

/// What the last audit found on the workspace, under its own heading; a failing check that
/// names a file the workspace has only elsewhere gets a hint (`path_hints`). Only the
/// criteria `shown` lets through; the gate's reasons only for a step of the whole goal
/// (`partial` false).
fn push_feedback(
    s: &mut String,
    feedback: &ExecFeedback,
    files: &[String],
    shown: &dyn Fn(&str) -> bool,
    partial: bool,
) {
    if feedback.is_empty() {
        return;
    }
    let snapshot = feedback
        .audited_snapshot
        .as_deref()
        .map(|id| format!(" (snapshot {})", id.get(..12).unwrap_or(id)))
        .unwrap_or_default();
    s.push_str(&format!("\nWhat the last audit found{snapshot}:\n"));
    if let Some(rejected) = &feedback.rejected {
        s.push_str(&format!("- {rejected}\n"));
    }
    for failing in feedback.failing.iter().filter(|f| shown(&f.criterion)) {
        push_failing(s, failing, files);
    }
    if !partial && !feedback.gate_reasons.is_empty() {
        s.push_str(&format!(
            "- the completion gate is closed: {}\n",
            feedback.gate_reasons.join("; ")
        ));
    }
    if !feedback.changed_paths.is_empty() {
        let shown: Vec<&str> = feedback
            .changed_paths
            .iter()
            .take(CHANGED_SHOWN)
            .map(String::as_str)
            .collect();
        s.push_str(&format!("- the last round changed: {}\n", shown.join(", ")));
    }
    let withheld = withheld_previews(feedback);
    if !withheld.is_empty() {
        let paths = withheld
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ");
        s.push_str(&fill(
            include_str!("withheld_files.md"),
            &[("paths", &paths)],
        ));
        s.push('\n');
    }
    if !feedback.attempts.is_empty() {
        s.push_str("Earlier attempts that did not work; take a different approach:\n");
        for a in &feedback.attempts {
            s.push_str(&format!("- {a}\n"));
        }
    }
}

/// One failing check (or unmet goal clause) of the last audit, with its output and the hints
/// for the paths it names.
fn push_failing(s: &mut String, f: &FailingCheck, files: &[String]) {
    let exit = f
        .exit_code
        .map(|c| format!("exit {c}"))
        .unwrap_or_else(|| format!("{:?}", f.verdict).to_lowercase());
    let check = f
        .check
        .as_deref()
        .map(|c| format!(": `{c}`"))
        .unwrap_or_default();
    if f.check.is_some() {
        s.push_str(&format!(
            "- check `{}` failed ({exit}){check}\n",
            f.criterion
        ));
    } else {
        // A goal clause judged by the auditor: its evidence quotes the clause.
        s.push_str(&format!(
            "- criterion `{}` is not met ({exit})\n",
            f.criterion
        ));
    }
    if !f.output_excerpt.trim().is_empty() {
        s.push_str("  output:\n");
        for line in f.output_excerpt.trim().lines() {
            s.push_str(&format!("    {line}\n"));
        }
    }
    if let Some(check) = &f.check {
        for hint in missing_path_hints(check, &f.output_excerpt, files) {
            s.push_str(&format!("  {hint}\n"));
        }
    }
}
