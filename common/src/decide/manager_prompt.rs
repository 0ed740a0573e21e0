//! The manager's prompt: goal, frozen contract, task state, recent audits, feedback and budget,
//! bounded by a character budget however many rounds have run.

use crate::decide::{ledger_lines, INSTRUCTIONS_PROMPT_CHARS};
use crate::state::RunRecord;
use loopgate_protocol::verdict::Verdicts;

pub const DEFAULT_CHAR_BUDGET: usize = 24_000;

/// The manager's system prompt. Routes no worker serves are not offered (a weak model will
/// otherwise pick them).
pub fn system_prompt(gui_offered: bool) -> String {
    let gui = if gui_offered {
        "- gui: the same, plus a headless browser to open, click and screenshot the app's pages (for steps that need to look at or drive a web page)\n"
    } else {
        ""
    };
    let routes = if gui_offered {
        "cli|gui|done|blocked|ask"
    } else {
        "cli|done|blocked|ask"
    };
    format!(
        "You are the manager of a coding task. You never edit files yourself. \
Each turn you read the contract and the latest audit evidence, then choose exactly one next step:\n\
- cli: give the executor one bounded instruction to carry out in the workspace with shell and file tools\n\
{gui}\
- done: every acceptance check passes on the current snapshot (the harness verifies this; it refuses `done` otherwise)\n\
- blocked: the task is impossible or contradictory as specified (give the reason); a failing check is never a reason to block, it is a reason to try a different fix\n\
- ask: you need a human decision (give the question)\n\
Facts come only from audit evidence; anything else is a hypothesis. Preserve exact names, paths \
and formats from the goal. Never weaken a check, edit the acceptance tests or hard-code expected output.\n\
Reply with exactly these three lines and nothing else:\n\
Current task state: <one sentence on what is true now>\n\
Next: <{routes}>\n\
Task: <one concrete instruction for the executor, naming files and exact content; or the reason/question>"
    )
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
    let c = &record.contract;
    let b = &record.task.budget;
    let mut must = String::new();
    must.push_str(&format!("# Goal\n{}\n\n", truncate(&c.goal, 6000)));
    must.push_str(&format!("# Contract (spec {})\n", c.short_hash()));
    for crit in &c.criteria {
        let check = crit
            .check
            .as_deref()
            .map(|x| format!(" — check: `{}`", truncate(x, 300)))
            .unwrap_or_default();
        must.push_str(&format!(
            "- [{}] {}{}{}\n",
            crit.id,
            truncate(&crit.description, 300),
            if crit.blocking { "" } else { " (non-blocking)" },
            check
        ));
    }
    if !c.protected_paths.is_empty() {
        must.push_str(&format!(
            "Protected paths (must not change): {}\n",
            c.protected_paths.join(", ")
        ));
    }
    let (passing, checked) = record.checks_passing();
    must.push_str(&format!(
        "\n# Budget\nRound {} of at most {}; checks passing on the current snapshot: {}/{}.\n",
        record.round, b.max_rounds, passing, checked
    ));
    let ledger = ledger_lines(record);
    if !ledger.is_empty() {
        must.push_str("\n# Attempts so far (oldest first)\n");
        for line in &ledger {
            must.push_str(&format!("- {line}\n"));
        }
    }
    if let Some(state) = &record.task_state {
        must.push_str(&format!(
            "\n# Your task state from last turn\n{}\n",
            truncate(state, 1500)
        ));
    }
    must.push_str(&instructions_section(record));
    let mut feedback = String::new();
    if !record.feedback.is_empty() {
        feedback.push_str("\n# Feedback from the harness\n");
        for f in &record.feedback {
            feedback.push_str(&format!("- {}\n", truncate(f, 600)));
        }
    }
    let tail = "\nReply now with the three lines: Current task state, Next, Task.";
    let fixed = must.len() + feedback.len() + tail.len();
    let mut remaining = char_budget.saturating_sub(fixed);
    // Most recent rounds first; each gets at most what is left.
    let mut rounds: Vec<String> = Vec::new();
    for h in record.history.iter().rev() {
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
        if s.len() > remaining {
            if remaining > 200 {
                rounds.push(truncate(&s, remaining.saturating_sub(20)));
            }
            break;
        }
        remaining -= s.len();
        rounds.push(s);
    }
    let mut out = must;
    if !rounds.is_empty() {
        out.push_str("\n# Recent rounds (newest first)\n");
        for r in rounds {
            out.push_str(&r);
        }
    } else {
        out.push_str(
            "\n# Recent rounds\nNone yet: nothing has been executed or audited, so `done` would be refused. \
             Start with `Next: cli`.\n",
        );
    }
    out.push_str(&feedback);
    out.push_str(tail);
    if out.chars().count() > char_budget {
        out = truncate(&out, char_budget);
    }
    out
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
    let mut out = format!(
        "\n{INSTRUCTIONS_HEADING} (from the person steering this run; oldest first, the newest \
         wins where they conflict; follow them within the contract)\n"
    );
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
}
