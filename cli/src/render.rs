//! Human-readable lines for runs and run log entries (the `--json` forms print the server's JSON).

use loopgate_api::{short_ids, standing_text, LOG_HEADLINE_KEY};
pub use loopgate_common::state::excerpt;
use loopgate_common::state::{gate_word, short_id, verdicts_text, RunState};
use serde_json::Value;

use crate::run_view::{LogRecord, RunView};

/// One line per log entry: `[round N] what happened`. The words are the entry's headline: the
/// manager's (`headline`), or, from a manager that does not send one, this CLI's own
/// ([`loopgate_common::state::LogEvent::headline`]) for an event it knows, else the event's name
/// and its JSON.
pub fn log_line(record: &LogRecord) -> String {
    let round = record.raw.get("round").and_then(Value::as_u64).unwrap_or(0);
    if let Some(headline) = record.raw.get(LOG_HEADLINE_KEY).and_then(Value::as_str) {
        return format!("[round {round}] {headline}");
    }
    match &record.entry {
        Ok(entry) => format!("[round {}] {}", entry.round, entry.event.headline()),
        Err(raw) => {
            let kind = raw.get("type").and_then(Value::as_str).unwrap_or("entry");
            format!("[round {round}] {kind}: {}", excerpt(&raw.to_string(), 200))
        }
    }
}

/// `attempts: [round N] attempt K of M won: P/B checks ...`: the latest round of several
/// attempts in the run's log entries (its `attempt_won` headline), for `loopgate status`;
/// `None` when no step ran as several attempts.
pub fn attempts_line(entries: &[Value]) -> Option<String> {
    let last = entries
        .iter()
        .rev()
        .find(|e| e.get("type").and_then(Value::as_str) == Some("attempt_won"))?;
    Some(format!(
        "attempts:  {}",
        log_line(&LogRecord::from_value(last.clone()))
    ))
}

/// Blocks of lines repeated back to back, at most this long, are collapsed.
const MAX_REPEAT_PERIOD: usize = 3;

/// What repeats compare: a line without its leading `HH:MM:SS ZONE ` (the time and zone
/// `loopgate log` and `watch` put before each entry, `crate::log_clock`: `UTC` or `+01:00`), so
/// an entry repeated at other times is still a repeat (printed with the time of its first).
fn repeat_key(line: &str) -> &str {
    let b = line.as_bytes();
    let timed = b.len() > 9
        && b[2] == b':'
        && b[5] == b':'
        && b[8] == b' '
        && [0, 1, 3, 4, 6, 7].iter().all(|&k| b[k].is_ascii_digit());
    if !timed {
        return line;
    }
    let rest = &line[9..];
    let r = rest.as_bytes();
    let offset = r.len() > 6
        && matches!(r[0], b'+' | b'-')
        && r[3] == b':'
        && r[6] == b' '
        && [1, 2, 4, 5].iter().all(|&k| r[k].is_ascii_digit());
    if let Some(after) = rest.strip_prefix("UTC ") {
        after
    } else if offset {
        &rest[7..]
    } else {
        rest
    }
}

fn same_lines(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| repeat_key(x) == repeat_key(y))
}

/// Identical consecutive lines as one, with their count: `[round 3] done refused: ... (×11)`;
/// a block of up to 3 lines repeated back to back (a `next: done` decision and its `done
/// refused`, again and again) as one block, its last line ending `(these 2 lines ×11)`.
pub fn collapse_repeats(lines: Vec<String>) -> Vec<String> {
    let n = lines.len();
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        // The period covering the most lines from `i`, the shortest on a tie.
        let (mut period, mut repeats) = (1, 1);
        for p in 1..=MAX_REPEAT_PERIOD.min(n - i) {
            let mut r = 1;
            while i + (r + 1) * p <= n
                && same_lines(&lines[i + r * p..i + (r + 1) * p], &lines[i..i + p])
            {
                r += 1;
            }
            if r > 1 && r * p > period * repeats {
                (period, repeats) = (p, r);
            }
        }
        for (k, line) in lines[i..i + period].iter().enumerate() {
            let last = k + 1 == period;
            out.push(match (repeats, period) {
                (1, _) => line.clone(),
                (_, 1) => format!("{line} (×{repeats})"),
                _ if last => format!("{line} (these {period} lines ×{repeats})"),
                _ => line.clone(),
            });
        }
        i += period * repeats;
    }
    out
}

/// [`collapse_repeats`] for a stream (`loopgate watch`): each line is printed as it comes,
/// except one that repeats the line (or the block of up to 3 lines) before it, which is held
/// back and counted; the count is printed when something else comes, or at [`flush`].
///
/// [`flush`]: RepeatFilter::flush
#[derive(Debug, Default)]
pub struct RepeatFilter {
    /// The latest lines seen (printed or held back), at most twice the longest period.
    recent: Vec<String>,
    /// The period being repeated, and how many lines of it were held back.
    repeating: Option<(usize, usize)>,
}

impl RepeatFilter {
    /// The lines to print now for `line`.
    pub fn push(&mut self, line: String) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((period, held)) = self.repeating {
            if self.recent.len() >= period
                && repeat_key(&self.recent[self.recent.len() - period]) == repeat_key(&line)
            {
                self.repeating = Some((period, held + 1));
                self.remember(line);
                return out;
            }
            out.extend(self.flush());
        }
        let n = self.recent.len();
        let starts_repeat = (1..=MAX_REPEAT_PERIOD).find(|&p| {
            // `line` completes a block of `p` lines equal to the `p` lines before it.
            n + 1 >= 2 * p
                && self.recent[n + 1 - p..]
                    .iter()
                    .chain(std::iter::once(&line))
                    .map(|l| repeat_key(l))
                    .eq(self.recent[n + 1 - 2 * p..n + 1 - p]
                        .iter()
                        .map(|l| repeat_key(l)))
        });
        match starts_repeat {
            Some(period) => self.repeating = Some((period, 1)),
            None => out.push(line.clone()),
        }
        self.remember(line);
        out
    }

    /// The count of lines held back, if any (the stream ended or moved on).
    pub fn flush(&mut self) -> Option<String> {
        let (period, held) = self.repeating.take()?;
        Some(if period == 1 {
            format!("  (the line above ×{} in all)", held + 1)
        } else {
            format!("  ({held} more lines repeating the {period} above)")
        })
    }

    fn remember(&mut self, line: String) {
        self.recent.push(line);
        let keep = 2 * MAX_REPEAT_PERIOD;
        if self.recent.len() > keep {
            self.recent.drain(..self.recent.len() - keep);
        }
    }
}

/// `loopgate status` in human form, at `now_ms` (Unix milliseconds).
pub fn run_summary(view: &RunView, now_ms: i64) -> Vec<String> {
    let rounds = rounds_text(view);
    let name = view
        .name
        .as_deref()
        .map(|n| format!(" \"{n}\""))
        .unwrap_or_default();
    let mut lines = vec![format!(
        "run {}{name}: {} (round {rounds}, generation {})",
        view.id,
        view.state.as_str(),
        view.generation
    )];
    if let Some(goal) = &view.goal {
        lines.push(format!("goal: {}", excerpt(goal, 200)));
    }
    lines.push(format!("standing: {}", standing(view)));
    if let Some(phase) = view.phase_name() {
        lines.push(format!("phase: {phase}"));
    }
    if let Some(snapshot) = &view.snapshot {
        let base = view.base_snapshot.as_deref().map(short_id).unwrap_or("?");
        lines.push(format!("snapshot: {snapshot} (base {base})"));
    }
    if let Some(origin) = &view.origin {
        lines.push(format!(
            "started from commit {} (tree {})",
            origin.describe(),
            short_id(&origin.tree)
        ));
        if view.state == RunState::Completed {
            lines.push(format!("put it on a branch: loopgate apply {}", view.id));
        }
    }
    match (&view.progress, view.checks) {
        (Some(progress), _) => lines.push(format!("progress: {progress}")),
        (None, Some(checks)) => lines.push(format!(
            "checks: {}/{} passing",
            checks.passing, checks.total
        )),
        (None, None) => {}
    }
    if let Some(since) = view.queued_since {
        let secs = now_ms.saturating_sub(since).max(0) / 1000;
        lines.push(format!(
            "queue: round {} waits for a free worker ({secs} s so far; a wait costs no round)",
            view.round
        ));
    }
    for p in &view.episode_progress {
        lines.push(format!(
            "running: executor {} turn {}{}, {} tool calls, {} tokens, {} s in (its last notice)",
            p.worker,
            p.turn,
            p.tool
                .as_deref()
                .map(|t| format!(", calling {t}"))
                .unwrap_or_default(),
            p.tool_calls,
            p.tokens,
            p.elapsed_ms / 1000
        ));
    }
    if let Some(p) = &view.audit_progress {
        lines.push(format!(
            "running: {} (its last notice)",
            audit_progress_text(p)
        ));
    }
    if let Some(verdicts) = &view.verdicts {
        lines.push(format!("audit: {}", verdicts_text(verdicts)));
    }
    if let Some(gate) = &view.gate {
        if gate.passed {
            lines.push(format!("gate: {}", gate_word(true)));
        } else {
            lines.push(format!(
                "gate: {} — {}",
                gate_word(false),
                gate.reasons.join("; ")
            ));
        }
    }
    if let Some(tokens) = view.total_tokens {
        lines.push(tokens_line(view, tokens));
    }
    if let Some(task_state) = &view.task_state {
        lines.push(format!(
            "manager's note (its claim, not checked): {}",
            excerpt(task_state, 300)
        ));
    }
    if view.state == RunState::WaitingForInput {
        if let Some(question) = &view.question {
            lines.push(format!("question: {question}"));
        }
        if view.planning.as_deref() == Some("approval") {
            lines.push(format!(
                "review with: loopgate contract {id}; approve with: loopgate approve {id} [--edit FILE]",
                id = view.id
            ));
        } else {
            lines.push(format!("answer with: loopgate answer {} \"TEXT\"", view.id));
        }
    }
    if view.state == RunState::Paused {
        lines.push(format!("unpause with: loopgate unpause {}", view.id));
    }
    if !view.instructions.is_empty() {
        lines.push("operator instructions (newest last):".to_string());
        for i in &view.instructions {
            lines.push(format!("  - (round {}) {}", i.round, excerpt(&i.text, 200)));
        }
    }
    if let Some(reason) = &view.terminal_reason {
        lines.push(format!("reason: {reason}"));
    }
    if !view.actions.is_empty() {
        let names: Vec<&str> = view.actions.iter().map(|a| a.as_str()).collect();
        lines.push(format!("accepts now: {}", names.join(", ")));
    }
    lines.extend(evidence_lines(view));
    lines
}

/// Where the run stands from facts only: the manager's `standing`, or (from a manager that
/// sends none) the same words made here by [`standing_text`].
pub fn standing(view: &RunView) -> String {
    if view.standing.is_empty() {
        standing_text(view.state, &view.phase, view.gate.as_ref(), view.checks)
    } else {
        view.standing.clone()
    }
}

/// `tokens: N`, with the prompt tokens the providers read from their caches when there were
/// some.
fn tokens_line(view: &RunView, tokens: u64) -> String {
    let u = &view.usage;
    let cached = [u.manager, u.executor, u.auditor]
        .iter()
        .fold(0u64, |sum, role| {
            sum.saturating_add(role.cached_prompt_tokens)
        });
    if cached == 0 {
        format!("tokens: {tokens}")
    } else {
        format!("tokens: {tokens} ({cached} prompt tokens read from cache)")
    }
}

fn evidence_lines(view: &RunView) -> Vec<String> {
    if view.evidence.is_empty() {
        return Vec::new();
    }
    let mut lines = vec!["evidence:".to_string()];
    for e in &view.evidence {
        let exit = e
            .exit_code
            .map(|c| format!(", exit {c}"))
            .unwrap_or_default();
        let took = e
            .duration_ms
            .map(|ms| format!(", took {ms} ms"))
            .unwrap_or_default();
        lines.push(format!(
            "  {}: {} on snapshot {}{exit}{took}",
            e.check_id,
            e.verdict,
            short_id(&e.artifact_version)
        ));
    }
    lines
}

/// What `watch` prints when the run ends: state, reason, snapshot id and the evidence.
pub fn final_report(view: &RunView) -> Vec<String> {
    let reason = view.terminal_reason.as_deref().unwrap_or("no reason given");
    let mut lines = vec![format!("run {} {}: {reason}", view.id, view.state.as_str())];
    if let Some(snapshot) = &view.snapshot {
        lines.push(format!("snapshot: {snapshot}"));
    }
    if let Some(progress) = &view.progress {
        lines.push(format!("progress: {progress}"));
    }
    lines.push(format!("standing: {}", standing(view)));
    lines.extend(evidence_lines(view));
    if view.snapshot.is_some() {
        lines.push(format!("get the files: loopgate checkout {} DIR", view.id));
    }
    if view.origin.is_some() && view.state == RunState::Completed {
        lines.push(format!(
            "put it on a branch (verified first): loopgate apply {}",
            view.id
        ));
    }
    lines
}

/// `loopgate runs` in human form.
pub fn runs_table(views: &[RunView]) -> Vec<String> {
    runs_table_at(views, 0, None)
}

/// The width `loopgate runs` fits its lines to on a terminal: `$COLUMNS`, else 120.
pub fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|w| *w >= 40)
        .unwrap_or(120)
}

/// Goals are never cut shorter than this, whatever the width.
const MIN_GOAL_WIDTH: usize = 30;

/// `loopgate runs` at `now_ms` (Unix ms; 0 leaves ages out): one line a run, ids as short as
/// stays unambiguous (each one a RUN argument), name, state, rounds, checks, age and goal.
/// With `width` (a terminal) the goal's first line is cut to fit it; without, it is whole.
pub fn runs_table_at(views: &[RunView], now_ms: i64, width: Option<usize>) -> Vec<String> {
    if views.is_empty() {
        return vec!["no runs".to_string()];
    }
    let ids: Vec<&str> = views.iter().map(|v| v.id.as_str()).collect();
    let shown = short_ids(&ids);
    let rows: Vec<[String; 6]> = views
        .iter()
        .zip(shown)
        .map(|(v, id)| {
            let checks = v
                .checks
                .map(|c| format!("{}/{}", c.passing, c.total))
                .unwrap_or_else(|| "-".to_string());
            let age = if now_ms > 0 && v.created_at > 0 {
                age_text(now_ms.saturating_sub(v.created_at))
            } else {
                "-".to_string()
            };
            [
                id,
                v.name.clone().unwrap_or_else(|| "-".to_string()),
                v.state.as_str().to_string(),
                rounds_text(v),
                checks,
                age,
            ]
        })
        .collect();
    let header = ["ID", "NAME", "STATE", "ROUND", "CHECKS", "AGE"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let fmt = |cells: [&str; 6], goal: &str| {
        let mut line = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            let pad = w.saturating_sub(cell.chars().count());
            // Numbers right-aligned, words left-aligned.
            if (3..=5).contains(&i) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
            line.push_str("  ");
        }
        line.push_str(goal);
        line
    };
    let prefix_width: usize = widths.iter().map(|w| w + 2).sum();
    let goal_width = width.map(|w| w.saturating_sub(prefix_width).max(MIN_GOAL_WIDTH));
    let mut lines = vec![fmt(header, "GOAL")];
    for (v, row) in views.iter().zip(&rows) {
        let goal = v.goal.as_deref().unwrap_or("");
        let goal = match goal_width {
            Some(w) => excerpt(goal, w.saturating_sub(1).max(1)),
            None => goal.split_whitespace().collect::<Vec<_>>().join(" "),
        };
        lines.push(fmt(
            [&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]],
            &goal,
        ));
    }
    lines
}

/// `3/5` (this generation's counted rounds of `max_rounds`), `7 (3/5 counted)` when the run's
/// round number differs from the rounds counted (planning rounds, an earlier generation).
pub fn rounds_text(view: &RunView) -> String {
    loopgate_api::rounds_text(view.round, view.counted_rounds, view.max_rounds)
}

/// `42s`, `5m`, `3h`, `2d`.
pub fn age_text(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The line under a page of `loopgate runs`: which runs these are and, when more exist, the
/// command for the next page.
pub fn runs_footer(
    offset: u64,
    shown: usize,
    next_offset: Option<u64>,
    state: Option<&str>,
) -> Vec<String> {
    let Some(next) = next_offset else {
        return Vec::new();
    };
    let state = state.map(|s| format!(" --state {s}")).unwrap_or_default();
    vec![format!(
        "runs {}-{} shown; more exist: loopgate runs{state} --offset {next}",
        offset + 1,
        offset + shown as u64
    )]
}

/// A running audit's progress notice in the log's words (`auditor audit-1 auditing: running
/// check tests (2 of 3), 4.5 s elapsed`).
fn audit_progress_text(p: &loopgate_protocol::wire::AuditProgress) -> String {
    loopgate_common::state::LogEvent::AuditProgress {
        worker: p.worker.clone(),
        stage: p.stage,
        check: p.check.clone(),
        check_index: p.check_index,
        checks_total: p.checks_total,
        elapsed_ms: p.elapsed_ms,
    }
    .headline()
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
