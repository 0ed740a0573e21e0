//! Turning a repeated write into feedback. A model that believes it is done may repeat its
//! last whole-file write (`write_file`) for every step it has left, and see why it fails only
//! at `finish`. The second identical write in a row changes nothing, so the loop treats it as
//! the agent's claim that the step is done: it runs the self-check at once (or, when nothing
//! changed since the last one, repeats its findings) and answers the write with them. Which
//! tools write whole files and which only read comes from the tools' definitions
//! (`ToolEffect`). Pure: the loop runs the checks.

use loopgate_models::ToolCall;

use crate::prompt::template::fill;
use crate::tools::tool::Tool;
use crate::tools::tool_def::ToolEffect;

/// What the loop does after a tool call ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AfterCall {
    /// Nothing more.
    Nothing,
    /// The same write again, with the workspace changed since the checks last ran (or never
    /// checked): run the self-check now.
    CheckNow,
    /// The same write again and nothing changed since the last self-check: show its findings
    /// again.
    RepeatFindings(String),
    /// As `RepeatFindings`, after the findings were already repeated
    /// [`MAX_REPEATED_FINDINGS`] times this episode: the agent is stuck, the episode ends.
    Stuck(String),
    /// The same call (tool and arguments) failed this many times in a row,
    /// [`MAX_IDENTICAL_FAILURES`] or more: the agent is stuck, the episode ends.
    FailingAgain(u32),
}

/// Times the very same call may fail in a row before the episode ends: a 1.5B model sent one
/// `edit_file` whose `old` was not in the file ten times in a row, each time shown the file's
/// text, and spent 30,000 tokens on it; the step's next episode starts from a fresh prompt.
pub(crate) const MAX_IDENTICAL_FAILURES: u32 = 3;

/// Times an episode answers a write that changes nothing with the findings the agent has
/// already seen for that very workspace; the next such write is `AfterCall::Stuck`: a model
/// that repeats a refused write tends to repeat it to the step cap, and the next episode, from
/// a fresh prompt at a higher temperature, is more likely to write something else.
pub(crate) const MAX_REPEATED_FINDINGS: u32 = 1;

/// The episode's memory of its last tool call and its last self-check.
#[derive(Debug, Default, Clone)]
pub(crate) struct RepeatGuard {
    /// The last call's tool name and arguments as JSON text.
    last_call: Option<(String, String)>,
    /// A call that may have changed the workspace ran since the last self-check.
    changed_since_check: bool,
    /// The last self-check's refusal, when it refused.
    last_refusal: Option<String>,
    /// Repeated writes answered with findings the agent had already seen.
    repeated_findings: u32,
    /// Times in a row the last call failed, identical each time.
    identical_failures: u32,
}

impl RepeatGuard {
    /// Record one call that ran (`ok`: it did not fail) and say what the loop does next.
    pub(crate) fn after_call(&mut self, call: &ToolCall, ok: bool) -> AfterCall {
        let key = (call.name.clone(), call.arguments.to_string());
        let effect = Tool::effect_of(&call.name);
        // Writing the same bytes again changes nothing.
        let same = self.last_call.as_ref() == Some(&key);
        let repeat = ok && matches!(effect, Some(ToolEffect::WritesFile { .. })) && same;
        self.last_call = Some(key);
        self.identical_failures = match (ok, same) {
            (true, _) => 0,
            (false, true) => self.identical_failures + 1,
            (false, false) => 1,
        };
        if self.identical_failures >= MAX_IDENTICAL_FAILURES {
            return AfterCall::FailingAgain(self.identical_failures);
        }
        if repeat {
            return match (&self.last_refusal, self.changed_since_check) {
                (Some(refusal), false) if self.repeated_findings >= MAX_REPEATED_FINDINGS => {
                    AfterCall::Stuck(refusal.clone())
                }
                (Some(refusal), false) => {
                    self.repeated_findings += 1;
                    AfterCall::RepeatFindings(refusal.clone())
                }
                _ => AfterCall::CheckNow,
            };
        }
        if ok && effect != Some(ToolEffect::ReadOnly) {
            self.changed_since_check = true;
        }
        AfterCall::Nothing
    }

    /// A self-check ran on the workspace as it is now; `refusal` is its refusal text when it
    /// refused.
    pub(crate) fn checked(&mut self, refusal: Option<&str>) {
        self.changed_since_check = false;
        self.last_refusal = refusal.map(str::to_string);
    }
}

/// The tool result of a repeated write: its own result, then why the loop checked.
pub(crate) fn repeated_write_text(result: &str, findings: &str) -> String {
    fill(
        include_str!("repeated_write.md"),
        &[("result", result), ("findings", findings)],
    )
}

/// The summary of an episode the loop ended after a repeated write whose checks all passed.
pub(crate) const REPEAT_PASSED_SUMMARY: &str =
    "repeated the last write; the step's checks pass on the workspace";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall::new("c", name, args)
    }

    #[test]
    fn repeats_table() {
        let w = |content: &str| call("write_file", json!({"path": "a.py", "content": content}));
        let read = call("read_file", json!({"path": "a.py"}));
        let sh = call("shell", json!({"command": "true"}));
        // (calls with ok, self-check refusal after call index, expected effect of the last call)
        type Case = (
            Vec<(ToolCall, bool)>,
            Option<(usize, Option<&'static str>)>,
            AfterCall,
        );
        let cases: Vec<Case> = vec![
            (vec![(w("x"), true)], None, AfterCall::Nothing),
            (
                vec![(w("x"), true), (w("x"), true)],
                None,
                AfterCall::CheckNow,
            ),
            (
                vec![(w("x"), true), (w("y"), true)],
                None,
                AfterCall::Nothing,
            ),
            // a failed write is not a repeat, nor is a write after a failed one
            (
                vec![(w("x"), false), (w("x"), false)],
                None,
                AfterCall::Nothing,
            ),
            // the same call failing a third time in a row ends the episode
            (
                vec![(w("x"), false), (w("x"), false), (w("x"), false)],
                None,
                AfterCall::FailingAgain(MAX_IDENTICAL_FAILURES),
            ),
            // a different call (or a success) in between starts the count again
            (
                vec![
                    (w("x"), false),
                    (w("x"), false),
                    (w("y"), false),
                    (w("x"), false),
                    (w("x"), false),
                ],
                None,
                AfterCall::Nothing,
            ),
            (
                vec![
                    (sh.clone(), false),
                    (sh.clone(), false),
                    (sh.clone(), true),
                    (sh.clone(), false),
                ],
                None,
                AfterCall::Nothing,
            ),
            // something in between breaks the run
            (
                vec![(w("x"), true), (read.clone(), true), (w("x"), true)],
                None,
                AfterCall::Nothing,
            ),
            // checked and refused, nothing changed since: the same findings, no new check
            (
                vec![(w("x"), true), (w("x"), true), (w("x"), true)],
                Some((1, Some("refused"))),
                AfterCall::RepeatFindings("refused".into()),
            ),
            // ... and once those were repeated, the next such write is stuck
            (
                vec![
                    (w("x"), true),
                    (w("x"), true),
                    (w("x"), true),
                    (w("x"), true),
                ],
                Some((1, Some("refused"))),
                AfterCall::Stuck("refused".into()),
            ),
            // a shell command since the check may have changed things: check again
            (
                vec![(w("x"), true), (sh, true), (w("x"), true), (w("x"), true)],
                Some((0, Some("refused"))),
                AfterCall::CheckNow,
            ),
            // a passing check leaves no findings to repeat
            (
                vec![(w("x"), true), (w("x"), true), (w("x"), true)],
                Some((1, None)),
                AfterCall::CheckNow,
            ),
            // edits are not idempotent: the same edit twice can change the file twice
            (
                vec![
                    (
                        call("edit_file", json!({"path": "a", "old": "p", "new": "pp"})),
                        true,
                    ),
                    (
                        call("edit_file", json!({"path": "a", "old": "p", "new": "pp"})),
                        true,
                    ),
                ],
                None,
                AfterCall::Nothing,
            ),
        ];
        for (calls, check, want) in cases {
            let mut guard = RepeatGuard::default();
            let mut got = AfterCall::Nothing;
            for (i, (c, ok)) in calls.iter().enumerate() {
                got = guard.after_call(c, *ok);
                if let Some((at, refusal)) = check {
                    if at == i {
                        guard.checked(refusal);
                    }
                }
            }
            assert_eq!(got, want, "{calls:?} {check:?}");
        }
    }

    #[test]
    fn the_repeated_write_text_keeps_the_result_and_the_findings() {
        let text = repeated_write_text("a.py already holds exactly this", "finish refused: 1");
        assert!(text.starts_with("a.py already holds exactly this"));
        assert!(text.ends_with("finish refused: 1"));
    }
}
