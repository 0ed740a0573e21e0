//! The `continuation` arm's own rules, as a user's script would have them: the goal of the next
//! episode (the goal's own words, then `These checks fail:` with each failing public check's
//! command and the end of its output), and when the loop stops (the public checks pass, or the
//! episodes, tokens or wall time run out). Pure.

use std::time::Duration;

use loopgate_common::task::MAX_GOAL_CHARS;
use serde::{Deserialize, Serialize};

/// The line that opens the failing checks in a continuation goal.
pub const FAILING_HEADER: &str = "These checks fail:";
/// The end of each failing check's output that goes into the goal, in characters.
pub const OUTPUT_EXCERPT_CHARS: usize = 400;
/// The failing checks' part of a goal stays under this many characters (about 900 tokens), so
/// the episode's first prompt fits the default model's 8,192-token window: `pipeline-orders`'
/// prompt is about 5,900 tokens before it (the executor's system prompt, tools and previews),
/// and an 8,000-character part took it past the window on every episode after the first.
const FAILING_PART_CHARS: usize = 3_000;

/// A public check that failed on the last snapshot, as the bench ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailingCheck {
    pub id: String,
    pub command: String,
    /// The exit code; `None` when it timed out or a signal ended it.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// What it printed (stdout then stderr).
    pub output: String,
}

/// The goal of the next episode: `goal` as written, then the failing checks, each with its
/// command, how it ended and the end of its output. With nothing failing, `goal` itself.
pub fn continuation_goal(goal: &str, failing: &[FailingCheck]) -> String {
    let goal = goal.trim_end();
    if failing.is_empty() {
        return goal.to_string();
    }
    let room = FAILING_PART_CHARS.min(MAX_GOAL_CHARS.saturating_sub(goal.chars().count() + 200));
    let mut part = String::new();
    let mut left_out = Vec::new();
    for check in failing {
        let block = failing_block(check);
        if part.chars().count() + block.chars().count() <= room {
            part.push_str(&block);
        } else {
            left_out.push(check.id.as_str());
        }
    }
    if !left_out.is_empty() {
        part.push_str(&format!(
            "- and {} more failing (no room for their output): {}\n",
            left_out.len(),
            left_out.join(", ")
        ));
    }
    format!("{goal}\n\n{FAILING_HEADER}\n{}", part.trim_end())
}

/// `` - `COMMAND` exits 1:`` and the end of the output, indented.
fn failing_block(check: &FailingCheck) -> String {
    let ended = match (check.timed_out, check.exit_code) {
        (true, _) => "runs out of time".to_string(),
        (false, Some(code)) => format!("exits {code}"),
        (false, None) => "is killed by a signal".to_string(),
    };
    let mut block = format!("- `{}` {ended}", check.command.trim());
    let output = tail_chars(check.output.trim(), OUTPUT_EXCERPT_CHARS);
    if output.is_empty() {
        block.push_str(" (no output)\n");
    } else {
        block.push_str(":\n");
        for line in output.lines() {
            block.push_str("    ");
            block.push_str(line);
            block.push('\n');
        }
    }
    block
}

/// The last `max` characters of `text`, with `…` in front when cut.
fn tail_chars(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    let tail: String = text.chars().skip(count - max).collect();
    format!("…{tail}")
}

/// What the loop may spend in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpisodeBudget {
    pub max_episodes: u32,
    pub max_tokens: u64,
    pub max_wall: Duration,
}

/// Why the loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeStop {
    /// Every public check passes on the last snapshot.
    ChecksPass,
    Episodes,
    Tokens,
    Wall,
}

impl EpisodeStop {
    pub fn as_str(self) -> &'static str {
        match self {
            EpisodeStop::ChecksPass => "checks_pass",
            EpisodeStop::Episodes => "episodes",
            EpisodeStop::Tokens => "tokens",
            EpisodeStop::Wall => "wall",
        }
    }
}

/// The budget the next episode's run gets: what is left of the loop's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpisodeAllowance {
    pub tokens: u64,
    pub wall: Duration,
}

/// Whether another episode runs after `done` episodes that spent `tokens` in `elapsed`, with
/// `failing` public checks on the last snapshot (the first episode always runs).
pub fn next_episode(
    budget: EpisodeBudget,
    done: u32,
    tokens: u64,
    elapsed: Duration,
    failing: usize,
) -> Result<EpisodeAllowance, EpisodeStop> {
    if done > 0 && failing == 0 {
        return Err(EpisodeStop::ChecksPass);
    }
    if done >= budget.max_episodes {
        return Err(EpisodeStop::Episodes);
    }
    if tokens >= budget.max_tokens {
        return Err(EpisodeStop::Tokens);
    }
    if elapsed >= budget.max_wall {
        return Err(EpisodeStop::Wall);
    }
    Ok(EpisodeAllowance {
        tokens: budget.max_tokens - tokens,
        wall: budget.max_wall - elapsed,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_common::goal::words::goal_clauses;

    fn failing(id: &str, command: &str, exit: Option<i32>, output: &str) -> FailingCheck {
        FailingCheck {
            id: id.into(),
            command: command.into(),
            exit_code: exit,
            timed_out: false,
            output: output.into(),
        }
    }

    #[test]
    fn the_goal_grows_by_the_failing_checks() {
        let goal = "`count` prints the number of entries.\n`total` prints the sum.\n";
        assert_eq!(continuation_goal(goal, &[]), goal.trim_end());
        let got = continuation_goal(
            goal,
            &[
                failing(
                    "count",
                    "test \"$(python3 ledger.py ledger.csv count)\" = 6",
                    Some(1),
                    "Traceback (most recent call last):\nNameError: name 'x' is not defined\n",
                ),
                failing("total", "python3 t.py", Some(2), ""),
                FailingCheck {
                    timed_out: true,
                    ..failing("slow", "sleep 99", None, "")
                },
                failing("killed", "kill -9 $$", None, ""),
            ],
        );
        assert_eq!(
            got,
            "`count` prints the number of entries.\n`total` prints the sum.\n\n\
             These checks fail:\n\
             - `test \"$(python3 ledger.py ledger.csv count)\" = 6` exits 1:\n    \
             Traceback (most recent call last):\n    NameError: name 'x' is not defined\n\
             - `python3 t.py` exits 2 (no output)\n\
             - `sleep 99` runs out of time (no output)\n\
             - `kill -9 $$` is killed by a signal (no output)"
        );
        // The goal's own clauses come first and unchanged.
        let clauses = goal_clauses(&got);
        assert_eq!(clauses[..2], goal_clauses(goal)[..]);
    }

    #[test]
    fn long_output_keeps_its_end_and_the_goal_stays_bounded() {
        let output = format!("{}THE END", "x".repeat(5000));
        let got = continuation_goal("g.", &[failing("a", "c", Some(1), &output)]);
        assert!(got.contains("THE END"), "{got}");
        assert!(got.contains('…'));
        assert!(got.chars().count() < 800, "{}", got.chars().count());
        let many: Vec<FailingCheck> = (0..40)
            .map(|i| failing(&format!("c{i}"), "cmd", Some(1), &"y".repeat(1000)))
            .collect();
        let got = continuation_goal("g.", &many);
        assert!(
            got.chars().count() <= FAILING_PART_CHARS + 400,
            "{}",
            got.len()
        );
        assert!(
            got.contains("more failing (no room for their output): c"),
            "{got}"
        );
        assert!(got.ends_with("c39"), "{got}");
        // A goal near the task file's limit still leaves a valid goal.
        let big = "z".repeat(MAX_GOAL_CHARS - 100);
        let got = continuation_goal(&big, &many[..1]);
        assert!(
            got.chars().count() <= MAX_GOAL_CHARS,
            "{}",
            got.chars().count()
        );
    }

    #[test]
    fn the_loop_stops_when_the_checks_pass_or_the_budget_ends() {
        let budget = EpisodeBudget {
            max_episodes: 3,
            max_tokens: 1000,
            max_wall: Duration::from_secs(100),
        };
        let secs = Duration::from_secs;
        // (done, tokens, elapsed, failing, outcome)
        let cases = [
            (
                0,
                0,
                secs(0),
                5,
                Ok(EpisodeAllowance {
                    tokens: 1000,
                    wall: secs(100),
                }),
            ),
            // The first episode runs even with nothing known to fail.
            (
                0,
                0,
                secs(0),
                0,
                Ok(EpisodeAllowance {
                    tokens: 1000,
                    wall: secs(100),
                }),
            ),
            (
                1,
                400,
                secs(30),
                2,
                Ok(EpisodeAllowance {
                    tokens: 600,
                    wall: secs(70),
                }),
            ),
            (1, 400, secs(30), 0, Err(EpisodeStop::ChecksPass)),
            (3, 400, secs(30), 2, Err(EpisodeStop::Episodes)),
            (2, 1000, secs(30), 2, Err(EpisodeStop::Tokens)),
            (2, 1200, secs(30), 2, Err(EpisodeStop::Tokens)),
            (2, 100, secs(100), 2, Err(EpisodeStop::Wall)),
            // Passing checks win over a spent budget.
            (3, 5000, secs(500), 0, Err(EpisodeStop::ChecksPass)),
        ];
        for (done, tokens, elapsed, failing, want) in cases {
            assert_eq!(
                next_episode(budget, done, tokens, elapsed, failing),
                want,
                "{done} {tokens} {elapsed:?} {failing}"
            );
        }
    }
}
