//! What a self-check's findings do to the agent's `finish`, and the budget of self-checks per
//! episode. Pure: the tool loop runs the checks and carries out the effect.

use loopgate_common::output_cap::output_excerpt;
use loopgate_protocol::verdict::CheckVerdict;

/// Every refusal begins with this (the interface the agent and the tests read).
pub(crate) const REFUSAL_PREFIX: &str = "finish refused:";
/// Characters of a failing check's output (its tail) shown in a refusal.
pub(crate) const REFUSAL_EXCERPT_CHARS: usize = 2000;

/// What a self-check found for one criterion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckFinding {
    pub(crate) id: String,
    pub(crate) verdict: CheckVerdict,
    /// `None` when a signal ended the check, or it never exited (timeout, not started).
    pub(crate) exit_code: Option<i32>,
    /// The tail of its output, at most [`REFUSAL_EXCERPT_CHARS`] characters.
    pub(crate) excerpt: String,
    /// Lines the refusal adds under the excerpt (see `path_hints`).
    pub(crate) hints: Vec<String>,
}

impl CheckFinding {
    pub(crate) fn new(
        id: &str,
        verdict: CheckVerdict,
        exit_code: Option<i32>,
        output: &[u8],
    ) -> Self {
        CheckFinding {
            id: id.to_string(),
            verdict,
            exit_code,
            excerpt: output_excerpt(output, REFUSAL_EXCERPT_CHARS),
            hints: Vec::new(),
        }
    }

    pub(crate) fn with_hints(mut self, hints: Vec<String>) -> Self {
        self.hints = hints;
        self
    }
}

/// What the loop does with the agent's `finish`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FinishEffect {
    /// The episode ends (every targeted check passed, no self-check was due, or it could not
    /// run: the audit decides either way).
    Accept,
    /// Answer `finish` with this tool result and go on.
    Refuse { text: String, failing: u32 },
}

/// Self-checks an episode may run: `allowed` in all, none once closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SelfCheckBudget {
    allowed: u32,
    used: u32,
    closed: bool,
}

impl SelfCheckBudget {
    pub(crate) fn new(allowed: u32) -> Self {
        SelfCheckBudget {
            allowed,
            used: 0,
            closed: false,
        }
    }

    /// Take one self-check; false when none is left.
    pub(crate) fn take(&mut self) -> bool {
        if self.closed || self.used >= self.allowed {
            return false;
        }
        self.used += 1;
        true
    }

    /// No more self-checks in this episode (its last turn after the step cap).
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    pub(crate) fn used(&self) -> u32 {
        self.used
    }

    /// Whether [`SelfCheckBudget::take`] would grant one.
    pub(crate) fn has_left(&self) -> bool {
        !self.closed && self.used < self.allowed
    }
}

/// `finish` is refused while any targeted check fails (exits non-zero). A check that proved
/// nothing (timed out, could not start) does not refuse it: the agent cannot act on that, and
/// the audit reports it.
pub(crate) fn finish_effect(findings: &[CheckFinding]) -> FinishEffect {
    let failing: Vec<&CheckFinding> = findings
        .iter()
        .filter(|f| f.verdict == CheckVerdict::Fail)
        .collect();
    if failing.is_empty() {
        return FinishEffect::Accept;
    }
    FinishEffect::Refuse {
        text: refusal_text(&failing),
        failing: u32::try_from(failing.len()).unwrap_or(u32::MAX),
    }
}

/// `finish refused: N blocking check(s) still fail on your workspace`, then one
/// `- <id> (exit <code>): <excerpt>` per failing check (later excerpt lines indented).
pub(crate) fn refusal_text(failing: &[&CheckFinding]) -> String {
    let mut text = format!(
        "{REFUSAL_PREFIX} {} blocking check(s) still fail on your workspace\n",
        failing.len()
    );
    for finding in failing {
        let exit = finding
            .exit_code
            .map_or_else(|| "signal".to_string(), |code| code.to_string());
        let excerpt = finding.excerpt.trim();
        let excerpt = if excerpt.is_empty() {
            "(no output)".to_string()
        } else {
            excerpt.replace('\n', "\n  ")
        };
        text.push_str(&format!("- {} (exit {exit}): {excerpt}\n", finding.id));
        for hint in &finding.hints {
            text.push_str(&format!("  {hint}\n"));
        }
    }
    text.push_str("Fix the workspace so these checks pass, then call finish again.");
    text
}

/// The message that gives the agent its one more turn after the step cap.
pub(crate) fn step_cap_message(refusal: &str) -> String {
    format!(
        "{refusal}\nYou have reached the step limit: this is your last turn. Fix what you can \
         now; the episode ends after this turn."
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn finding(id: &str, verdict: CheckVerdict, exit: Option<i32>, out: &str) -> CheckFinding {
        CheckFinding::new(id, verdict, exit, out.as_bytes())
    }

    #[test]
    fn finish_effect_table() {
        let pass = finding("a", CheckVerdict::Pass, Some(0), "ok");
        let fail = finding("b", CheckVerdict::Fail, Some(1), "wrong\noutput");
        let killed = finding("c", CheckVerdict::Fail, None, "");
        let slow = finding("d", CheckVerdict::Inconclusive, None, "timed out");
        // (findings, refused ids with their exit as shown)
        let cases: Vec<(Vec<CheckFinding>, Option<Vec<&str>>)> = vec![
            (vec![], None),
            (vec![pass.clone()], None),
            (vec![pass.clone(), slow.clone()], None),
            (
                vec![pass.clone(), fail.clone()],
                Some(vec!["- b (exit 1): "]),
            ),
            (
                vec![fail.clone(), killed.clone(), slow],
                Some(vec!["- b (exit 1): ", "- c (exit signal): (no output)"]),
            ),
        ];
        for (findings, want) in cases {
            match (finish_effect(&findings), want) {
                (FinishEffect::Accept, None) => {}
                (FinishEffect::Refuse { text, failing }, Some(lines)) => {
                    assert!(text.starts_with(REFUSAL_PREFIX), "{text}");
                    let first = text.lines().next().unwrap();
                    assert_eq!(
                        first,
                        format!(
                            "finish refused: {} blocking check(s) still fail on your workspace",
                            lines.len()
                        )
                    );
                    assert_eq!(failing as usize, lines.len());
                    for line in lines {
                        assert!(text.lines().any(|l| l.starts_with(line)), "{line}: {text}");
                    }
                    assert!(
                        !text.contains("- a "),
                        "a passing check is not named: {text}"
                    );
                }
                (got, want) => panic!("{findings:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn multi_line_output_stays_under_its_criterion_and_is_capped() {
        let fail = finding("b", CheckVerdict::Fail, Some(2), "one\ntwo\n");
        let text = refusal_text(&[&fail]);
        assert!(text.contains("- b (exit 2): one\n  two\n"), "{text}");
        let long = "x".repeat(10 * REFUSAL_EXCERPT_CHARS) + "END";
        let big = finding("big", CheckVerdict::Fail, Some(1), &long);
        assert!(big.excerpt.chars().count() <= REFUSAL_EXCERPT_CHARS + 1);
        assert!(big.excerpt.ends_with("END"), "the tail is kept");
        assert!(refusal_text(&[&big]).len() < REFUSAL_EXCERPT_CHARS + 300);
    }

    #[test]
    fn hints_follow_their_criterion() {
        let fail = finding("b", CheckVerdict::Fail, Some(2), "no such file")
            .with_hints(vec!["hint: write it at `a.py`".into()]);
        let other = finding("c", CheckVerdict::Fail, Some(1), "x");
        let text = refusal_text(&[&fail, &other]);
        assert!(
            text.contains("- b (exit 2): no such file\n  hint: write it at `a.py`\n- c (exit 1)"),
            "{text}"
        );
    }

    #[test]
    fn budget_table() {
        // (allowed, takes attempted, takes granted)
        let cases = [(0, 3, 0), (1, 3, 1), (2, 2, 2), (2, 5, 2)];
        for (allowed, attempts, granted) in cases {
            let mut budget = SelfCheckBudget::new(allowed);
            let got = (0..attempts).filter(|_| budget.take()).count();
            assert_eq!(got, granted, "{allowed} {attempts}");
            assert_eq!(budget.used() as usize, granted);
        }
        let mut closed = SelfCheckBudget::new(5);
        assert!(closed.take());
        closed.close();
        assert!(!closed.take());
        assert_eq!(closed.used(), 1);
    }

    #[test]
    fn the_step_cap_message_keeps_the_refusal_first() {
        let fail = finding("b", CheckVerdict::Fail, Some(1), "no");
        let message = step_cap_message(&refusal_text(&[&fail]));
        assert!(message.starts_with(REFUSAL_PREFIX), "{message}");
        assert!(message.contains("- b (exit 1): no"), "{message}");
    }
}
