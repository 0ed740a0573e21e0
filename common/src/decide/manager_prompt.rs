//! The manager's prompt: goal, frozen contract, task state, recent audits, feedback and budget,
//! bounded by a character budget however many rounds have run.

use crate::decide::{ledger_lines, INSTRUCTIONS_PROMPT_CHARS};
use crate::next_step::Route;
use crate::prompt_template::{fill, text};
use crate::state::{RoundSummary, RunRecord};

use loopgate_protocol::verdict::Verdicts;

pub const DEFAULT_CHAR_BUDGET: usize = 24_000;

/// The system prompt's template: `{routes}` is filled with the offered routes, and the `gui`
/// route's line is dropped where no worker serves it.
const SYSTEM: &str = include_str!("manager_prompt/system.md");
/// The start of the `gui` route's line in [`SYSTEM`].
const GUI_ROUTE_LINE: &str = "- gui:";
/// The user prompt's goal, contract and budget.
const USER_HEAD: &str = include_str!("manager_prompt/user_head.md");
/// The recent-rounds section before any round has run.
const NO_ROUNDS: &str = include_str!("manager_prompt/no_rounds.md");
/// The heading of the operators' instructions, with how to read them.
const INSTRUCTIONS: &str = include_str!("manager_prompt/instructions.md");
/// The user prompt's last line.
const REPLY_NOW: &str = include_str!("manager_prompt/reply_now.md");

/// The manager's system prompt. Routes no worker serves are not offered (a weak model will
/// otherwise pick them).
pub fn system_prompt(gui_offered: bool) -> String {
    let routes: Vec<&str> = Route::ALL
        .iter()
        .filter(|r| r.offered(gui_offered))
        .map(|r| r.as_str())
        .collect();
    let template: String = text(SYSTEM)
        .split_inclusive('\n')
        .filter(|line| gui_offered || !line.starts_with(GUI_ROUTE_LINE))
        .collect();
    fill(&template, &[("routes", &routes.join("|"))])
}

fn verdict_line(v: &Verdicts) -> String {
    format!(
        "status={:?} integrity={:?} contract={:?}",
        v.status, v.integrity, v.contract
    )
    .to_lowercase()
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max.saturating_sub(15)).collect();
    format!("{head} …[truncated]")
}

/// Build the user prompt. Sections are added in priority order; optional ones are dropped or
/// shortened to stay within `char_budget`.
pub fn user_prompt(record: &RunRecord, char_budget: usize) -> String {
    let mut must = contract_section(record);
    must.push_str(&attempts_section(record));
    if let Some(state) = &record.task_state {
        must.push_str(&format!(
            "\n# Your task state from last turn\n{}\n",
            truncate(state, 1500)
        ));
    }
    must.push_str(&instructions_section(record));
    let feedback = feedback_section(record);
    let tail = format!("\n{}", text(REPLY_NOW));
    let fixed = must.len() + feedback.len() + tail.len();
    let rounds = recent_rounds(record, char_budget.saturating_sub(fixed));
    let mut out = must;
    if !rounds.is_empty() {
        out.push_str("\n# Recent rounds (newest first)\n");
        for r in rounds {
            out.push_str(&r);
        }
    } else {
        out.push('\n');
        out.push_str(NO_ROUNDS);
    }
    out.push_str(&feedback);
    out.push_str(&tail);
    if out.chars().count() > char_budget {
        out = truncate(&out, char_budget);
    }
    out
}

/// The goal, the frozen contract's criteria and protected paths, and the round budget.
fn contract_section(record: &RunRecord) -> String {
    let c = &record.contract;
    let mut criteria = String::new();
    for crit in &c.criteria {
        let check = crit
            .check
            .as_deref()
            .map(|x| format!(" — check: `{}`", truncate(x, 300)))
            .unwrap_or_default();
        criteria.push_str(&format!(
            "- [{}] {}{}{}\n",
            crit.id,
            truncate(&crit.description, 300),
            if crit.blocking { "" } else { " (non-blocking)" },
            check
        ));
    }
    let protected_paths = if c.protected_paths.is_empty() {
        String::new()
    } else {
        format!(
            "Protected paths (must not change): {}\n",
            c.protected_paths.join(", ")
        )
    };
    let (passing, checked) = record.checks_passing();
    fill(
        USER_HEAD,
        &[
            ("goal", &truncate(&c.goal, 6000)),
            ("spec", c.short_hash()),
            ("criteria", &criteria),
            ("protected_paths", &protected_paths),
            ("round", &record.round.to_string()),
            ("max_rounds", &record.task.budget.max_rounds.to_string()),
            ("passing", &passing.to_string()),
            ("checked", &checked.to_string()),
        ],
    )
}

/// The attempt ledger, oldest first; empty before any round.
fn attempts_section(record: &RunRecord) -> String {
    let ledger = ledger_lines(record);
    if ledger.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Attempts so far (oldest first)\n");
    for line in &ledger {
        out.push_str(&format!("- {line}\n"));
    }
    out
}

/// The harness's feedback lines; empty when there are none.
fn feedback_section(record: &RunRecord) -> String {
    if record.feedback.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Feedback from the harness\n");
    for f in &record.feedback {
        out.push_str(&format!("- {}\n", truncate(f, 600)));
    }
    out
}

/// The rounds' blocks, most recent first, within `remaining` characters: each gets at most what
/// is left, and the first that does not fit is cut short (when more than 200 are left) and ends
/// the list.
fn recent_rounds(record: &RunRecord, mut remaining: usize) -> Vec<String> {
    let mut rounds: Vec<String> = Vec::new();
    for h in record.history.iter().rev() {
        let s = round_block(h);
        if s.len() > remaining {
            if remaining > 200 {
                rounds.push(truncate(&s, remaining.saturating_sub(20)));
            }
            break;
        }
        remaining -= s.len();
        rounds.push(s);
    }
    rounds
}

/// One round as the manager reads it: the step, what the executor said, the audit's verdicts,
/// passing and failing checks and gaps.
fn round_block(h: &RoundSummary) -> String {
    let mut s = format!(
        "## Round {}\nStep: {}\n",
        h.round,
        truncate(&h.objective, 800)
    );
    if !h.exec_summary.is_empty() {
        s.push_str(&format!(
            "Executor said: {}\n",
            truncate(&h.exec_summary, 500)
        ));
    }
    match &h.verdicts {
        Some(v) => s.push_str(&format!("Audit: {}\n", verdict_line(v))),
        None => s.push_str("Audit: none\n"),
    }
    if !h.passing.is_empty() {
        s.push_str(&format!("Passing: {}\n", h.passing.join(", ")));
    }
    for (id, excerpt) in &h.failing {
        s.push_str(&format!(
            "Failing `{id}`: {}\n",
            truncate(excerpt.trim(), 700)
        ));
    }
    for g in h.gaps.iter().take(5) {
        s.push_str(&format!("Gap: {}\n", truncate(g, 200)));
    }
    s
}

/// The heading of the operators' instructions in the manager's prompt.
pub const INSTRUCTIONS_HEADING: &str = "# Operator instructions";

/// The kept operator instructions, oldest first, within [`INSTRUCTIONS_PROMPT_CHARS`] (the
/// newest are kept when they do not all fit); empty when there are none.
fn instructions_section(record: &RunRecord) -> String {
    let mut left = INSTRUCTIONS_PROMPT_CHARS;
    let mut kept: Vec<String> = Vec::new();
    for i in record.steering.instructions.iter().rev() {
        let line = format!("- (round {}) {}\n", i.round, i.text.trim());
        let n = line.chars().count();
        if n > left {
            break;
        }
        left -= n;
        kept.push(line);
    }
    if kept.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{INSTRUCTIONS}");
    for line in kept.into_iter().rev() {
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gui_is_offered_only_when_served() {
        assert!(system_prompt(true).contains("- gui:"));
        assert!(!system_prompt(false).contains("gui"));
    }

    /// The system prompt as the manager model reads it, pinned byte for byte.
    const SYSTEM_PROMPT_WITH_GUI: &str = r#"You are the manager of a coding task. You never edit files yourself. Each turn you read the contract and the latest audit evidence, then choose exactly one next step:
- cli: give the executor one bounded instruction to carry out in the workspace with shell and file tools
- gui: the same, plus a headless browser to open, click and screenshot the app's pages (for steps that need to look at or drive a web page)
- done: every acceptance check passes on the current snapshot (the harness verifies this; it refuses `done` otherwise)
- blocked: the task is impossible or contradictory as specified (give the reason); a failing check is never a reason to block, it is a reason to try a different fix
- ask: you need a human decision (give the question)
Facts come only from audit evidence; anything else is a hypothesis. Preserve exact names, paths and formats from the goal. Never weaken a check, edit the acceptance tests or hard-code expected output.
Reply with exactly these three lines and nothing else:
Current task state: <one sentence on what is true now>
Next: <cli|gui|done|blocked|ask>
Task: <one concrete instruction for the executor, naming files and exact content; or the reason/question>"#;

    #[test]
    fn the_system_prompt_renders_as_pinned() {
        assert_eq!(system_prompt(true), SYSTEM_PROMPT_WITH_GUI);
        // Without a gui worker: the same text less the `gui` route's line and its route word.
        let without_gui = SYSTEM_PROMPT_WITH_GUI
            .replace("- gui: the same, plus a headless browser to open, click and screenshot the app's pages (for steps that need to look at or drive a web page)\n", "")
            .replace("<cli|gui|done|blocked|ask>", "<cli|done|blocked|ask>");
        assert_eq!(system_prompt(false), without_gui);
    }

    #[test]
    fn a_fresh_runs_user_prompt_renders_as_pinned() {
        let want = r#"# Goal
Create hello.py

# Contract (spec 133c415a7881)
- [prints]  — check: `python3 hello.py`

# Budget
Round 0 of at most 3; checks passing on the current snapshot: 0/1.

# Recent rounds
None yet: nothing has been executed or audited, so `done` would be refused. Start with `Next: cli`.

Reply now with the three lines: Current task state, Next, Task."#;
        assert_eq!(user_prompt(&crate::decide::tests::started(), 24_000), want);
    }

    #[test]
    fn the_instructions_template_starts_with_their_heading() {
        assert!(INSTRUCTIONS.starts_with(INSTRUCTIONS_HEADING));
    }
}
