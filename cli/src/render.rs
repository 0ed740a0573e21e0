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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_latest_round_of_attempts_is_the_status_line() {
        let won = |round: u64, attempt: u64| {
            serde_json::json!({"type": "attempt_won", "at": 0, "generation": 1, "round": round,
                "attempt": attempt, "of": 3, "candidate": "a".repeat(64), "worker": "w",
                "tokens": 1, "passing": 7, "blocking": 9, "early": false, "others": ""})
        };
        let other = serde_json::json!({"type": "gate", "at": 0, "generation": 1, "round": 2,
            "passed": false, "snapshot": "s", "reasons": []});
        assert_eq!(attempts_line(std::slice::from_ref(&other)), None);
        assert_eq!(
            attempts_line(&[won(1, 1), won(2, 2), other]).as_deref(),
            Some("attempts:  [round 2] attempt 2 of 3 won: 7/9 checks (snapshot aaaaaaaaaaaa)")
        );
    }
    use serde_json::json;

    fn line(v: Value) -> String {
        log_line(&LogRecord::from_value(v))
    }

    #[test]
    fn log_lines_table() {
        let snap = "a".repeat(64);
        let cases = vec![
            (
                json!({"at":1,"generation":1,"round":1,"type":"decision","seq":1,"route":"cli",
                       "task":"Create hello.py\nthat prints","task_state":null}),
                "[round 1] next: cli — Create hello.py that prints",
            ),
            (
                json!({"at":1,"generation":1,"round":1,"type":"audit_report","purpose":"round","worker":"audit-1",
                       "snapshot":snap,"verdicts":{"status":"complete","integrity":"clean","contract":"aligned"},
                       "passing":1,"checked":1,"gaps":[],"downgraded":false}),
                "[round 1] audit: complete/clean/aligned — checks 1/1 passing",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"gate","passed":false,"snapshot":snap,
                       "reasons":["check 'a' fails","integrity is suspect, not clean"]}),
                "[round 2] gate: closed — check 'a' fails; integrity is suspect, not clean",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"exec_result","worker":"exec-1","candidate":snap,
                       "summary":"wrote hello.py","claimed_done":true,"tool_calls":3,"error":null}),
                "[round 2] executor exec-1: snapshot aaaaaaaaaaaa — its summary (a claim): wrote hello.py [3 tool calls] (claims done)",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"exec_result","worker":"exec-1","candidate":snap,
                       "summary":"fixed hello.py","claimed_done":true,"tool_calls":5,"error":null,
                       "self_check_refusals":2}),
                "[round 2] executor exec-1: snapshot aaaaaaaaaaaa — its summary (a claim): fixed hello.py [5 tool calls] [finish refused 2x by self-check] (claims done)",
            ),
            (
                json!({"at":1,"generation":1,"round":3,"type":"terminal","state":"budget_exhausted",
                       "reason":"max_rounds reached","snapshot":snap}),
                "[round 3] budget_exhausted: max_rounds reached (snapshot aaaaaaaaaaaa)",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"clause_step","clause":2,"of":2,
                       "text":"Create b.txt.","attempt":1}),
                "[round 2] the step is goal clause 2 of 2 (try 1), no manager decision (budget.clause_steps): Create b.txt.",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"instructed","text":"use pytest\nnot unittest"}),
                "[round 2] instruction: use pytest not unittest",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"paused","phase":"executing"}),
                "[round 2] paused (the executing step in flight finishes first)",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"held","step":"decide"}),
                "[round 2] held: the next step (decide) waits for unpause",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"unpaused","paused_ms":1500}),
                "[round 2] unpaused after 1.5 s",
            ),
            (
                json!({"at":1,"generation":2,"round":2,"type":"continued","goal":"Add bye.py",
                       "spec_hash":snap,"criteria":2,"base_snapshot":snap}),
                "[round 2] continued as a new generation from snapshot aaaaaaaaaaaa: contract aaaaaaaaaaaa (2 criteria), goal: Add bye.py",
            ),
            (
                json!({"at":1,"generation":1,"round":4,"type":"something_new","x":1}),
                "[round 4] something_new: ",
            ),
        ];
        for (value, expected) in cases {
            let got = line(value);
            assert!(got.starts_with(expected), "got {got:?}, want {expected:?}");
        }
    }

    #[test]
    fn runs_table_shows_short_ids_names_ages_and_fits_goals_to_a_terminal() {
        let goal = "Create hello.py that prints exactly: hello, loopgate; then write its tests";
        let views: Vec<RunView> = [
            ("0193a2b4-c5d6-7000-8000-000000000001", Some("hello"), 3_000),
            ("0193a2b4-ffff-7000-8000-000000000002", None, 7_200_000),
        ]
        .iter()
        .map(|(id, name, age)| {
            RunView::from_value(&json!({
                "id": id, "name": name, "state": "running", "round": 2, "counted_rounds": 2,
                "max_rounds": 5, "checks": {"passing": 0, "total": 1},
                "created_at": 10_000_000 - age, "goal": goal
            }))
            .unwrap()
        })
        .collect();
        let whole = runs_table_at(&views, 10_000_000, None);
        assert_eq!(
            whole,
            vec![
                "ID            NAME   STATE    ROUND  CHECKS  AGE  GOAL".to_string(),
                format!("0193a2b4-c5d  hello  running    2/5     0/1   3s  {goal}"),
                format!("0193a2b4-fff  -      running    2/5     0/1   2h  {goal}"),
            ]
        );
        let narrow = runs_table_at(&views, 10_000_000, Some(80));
        assert!(
            narrow.iter().all(|l| l.chars().count() <= 80),
            "{narrow:#?}"
        );
        assert!(narrow[1].ends_with('…'), "{narrow:#?}");
        assert_eq!(
            runs_footer(50, 50, Some(100), Some("running")),
            vec!["runs 51-100 shown; more exist: loopgate runs --state running --offset 100"]
        );
        assert!(runs_footer(0, 3, None, None).is_empty());
    }

    #[test]
    fn a_stream_holds_back_repeats_and_counts_them() {
        let feed = |lines: &[&str]| {
            let mut f = RepeatFilter::default();
            let mut out: Vec<String> = Vec::new();
            for l in lines {
                out.extend(f.push(l.to_string()));
            }
            out.extend(f.flush());
            out
        };
        let cases: [(&[&str], Vec<&str>); 5] = [
            (&["a", "b"], vec!["a", "b"]),
            (
                &["a", "a", "a", "b"],
                vec!["a", "  (the line above ×3 in all)", "b"],
            ),
            (
                &["x", "d", "r", "d", "r", "d", "r"],
                vec!["x", "d", "r", "d", "  (3 more lines repeating the 2 above)"],
            ),
            (&["a", "a"], vec!["a", "  (the line above ×2 in all)"]),
            (
                &["12:00:00 a", "12:00:03 a", "12:00:04 b"],
                vec!["12:00:00 a", "  (the line above ×2 in all)", "12:00:04 b"],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(feed(input), want, "{input:?}");
        }
    }

    #[test]
    fn identical_consecutive_lines_collapse_with_a_count() {
        let lines = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = [
            (
                lines(&["a", "a", "a", "b", "a"]),
                lines(&["a (×3)", "b", "a"]),
            ),
            (lines(&["a", "b"]), lines(&["a", "b"])),
            (lines(&[]), lines(&[])),
            (
                lines(&["x", "d", "r", "d", "r", "d", "r", "y"]),
                lines(&["x", "d", "r (these 2 lines ×3)", "y"]),
            ),
            (lines(&["a", "a", "b", "b"]), lines(&["a (×2)", "b (×2)"])),
            // The time before a line (`loopgate log`) is not part of what repeats: the first
            // one's time stays.
            (
                lines(&["00:00:01 [round 3] x", "00:00:09 [round 3] x", "00:00:10 b"]),
                lines(&["00:00:01 [round 3] x (×2)", "00:00:10 b"]),
            ),
            // Nor is its zone (`UTC`, or `--local`'s offset).
            (
                lines(&["00:00:01 UTC [round 3] x", "00:00:09 UTC [round 3] x"]),
                lines(&["00:00:01 UTC [round 3] x (×2)"]),
            ),
            (
                lines(&["01:00:01 +01:00 [round 3] x", "01:00:09 +01:00 [round 3] x"]),
                lines(&["01:00:01 +01:00 [round 3] x (×2)"]),
            ),
            (
                lines(&["19:00:01 -05:30 x", "19:00:09 -05:30 y"]),
                lines(&["19:00:01 -05:30 x", "19:00:09 -05:30 y"]),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(collapse_repeats(input), want);
        }
    }

    #[test]
    fn tokens_line_shows_cached_prompt_tokens_when_some() {
        let cases = [
            (json!({}), "tokens: 120"),
            (
                json!({"executor": {"input_tokens": 100, "output_tokens": 20}}),
                "tokens: 120",
            ),
            (
                json!({
                    "executor": {"input_tokens": 80, "output_tokens": 10, "cached_prompt_tokens": 60},
                    "manager": {"input_tokens": 20, "output_tokens": 10, "cached_prompt_tokens": 5},
                    "auditor": {"input_tokens": 0, "output_tokens": 0}
                }),
                "tokens: 120 (65 prompt tokens read from cache)",
            ),
        ];
        for (usage, want) in cases {
            let view = RunView::from_value(&json!({
                "id": "r1", "state": "running", "usage": usage, "total_tokens": 120
            }))
            .unwrap();
            let lines = run_summary(&view, 0);
            assert!(lines.contains(&want.to_string()), "{lines:?}");
        }
    }

    #[test]
    fn status_says_what_a_running_episode_does() {
        let view = RunView::from_value(&json!({
            "id": "r1", "state": "running", "episode_progress": [
                {"run_id": "r1", "generation": 1, "round": 2, "delivery_attempt": 1,
                 "worker": "exec-1", "turn": 3, "tool": "shell", "tool_calls": 2,
                 "tokens": 900, "elapsed_ms": 7400}
            ]
        }))
        .unwrap();
        let lines = run_summary(&view, 0);
        assert!(
            lines.contains(
                &"running: executor exec-1 turn 3, calling shell, 2 tool calls, 900 tokens, 7 s in (its last notice)"
                    .to_string()
            ),
            "{lines:?}"
        );
    }

    #[test]
    fn status_states_facts_and_marks_the_managers_note_as_a_claim() {
        let view = RunView::from_value(&json!({
            "id": "r1", "state": "completed", "phase": "finished", "task_state": "working.",
            "gate": {"passed": true, "snapshot": "f".repeat(64), "reasons": []},
            "checks": {"passing": 1, "total": 1}, "actions": ["continue"]
        }))
        .unwrap();
        let lines = run_summary(&view, 0);
        for want in [
            "standing: completed; gate open on snapshot ffffffffffff; checks 1/1 passing",
            "gate: open",
            "manager's note (its claim, not checked): working.",
            "accepts now: continue",
        ] {
            assert!(lines.contains(&want.to_string()), "{want}: {lines:?}");
        }
        assert!(
            !lines.iter().any(|l| l.starts_with("task state")),
            "{lines:?}"
        );
    }

    #[test]
    fn final_report_names_state_snapshot_and_evidence() {
        let view = RunView::from_value(&json!({
            "id": "r1", "state": "completed", "snapshot": "f".repeat(64), "terminal_reason": "all checks pass",
            "evidence": [{"artifact_version": "f".repeat(64), "check_id": "prints-greeting", "verdict": "pass", "exit_code": 0}]
        }))
        .unwrap();
        let lines = final_report(&view);
        assert_eq!(lines[0], "run r1 completed: all checks pass");
        assert_eq!(lines[1], format!("snapshot: {}", "f".repeat(64)));
        assert!(
            lines.contains(&"  prints-greeting: pass on snapshot ffffffffffff, exit 0".to_string())
        );
    }
}
