//! Pure pieces of the rubric judgment: the verdict read from the judge's reply (scores through
//! `loopgate_protocol::rubric`, the reason found here), and the `rubric` evidence record the gate
//! counts: `pass` only when the outcome is a pass, `fail` for any other scored outcome,
//! `inconclusive` when there is no score.

use loopgate_checks::EXCERPT_CHARS;
use loopgate_protocol::contract::RUBRIC_EVIDENCE_ID;
use loopgate_protocol::rubric::{
    normalize_key, rubric_outcome, Rubric, RubricParseError, RubricVerdict,
};
use loopgate_protocol::verdict::{CheckVerdict, Evidence};
use serde_json::Value;

use crate::prompt_text::cap_chars;
use crate::rubric::reply::parse_rubric_reply;

/// Characters of the judge's reason kept in the verdict.
pub(crate) const MAX_REASON_CHARS: usize = 500;
/// Lines of the reply used as the reason when the judge gave none.
const REASON_FALLBACK_LINES: usize = 3;
/// Keys (lowercase letters and digits only) read as the judge's reason.
const REASON_KEYS: &[&str] = &[
    "reason",
    "reasoning",
    "rationale",
    "justification",
    "explanation",
    "comment",
    "comments",
    "summary",
];
/// How deep nested objects are searched for a reason.
const MAX_REASON_DEPTH: usize = 4;

/// The verdict when there is no score: `reason` says why.
pub(crate) fn unscored(rubric: &Rubric, reason: impl Into<String>) -> RubricVerdict {
    RubricVerdict {
        threshold: rubric.threshold,
        score: None,
        outcome: None,
        reason: cap_chars(reason.into().trim(), MAX_REASON_CHARS),
    }
}

/// The verdict read from one reply of the judge; `Err` when it holds no usable score.
pub(crate) fn verdict_from_reply(
    text: &str,
    rubric: &Rubric,
) -> Result<RubricVerdict, RubricParseError> {
    let score = parse_rubric_reply(text, rubric)?;
    let outcome = rubric_outcome(&score, rubric);
    Ok(RubricVerdict {
        threshold: rubric.threshold,
        reason: judge_reason(text).unwrap_or_else(|| first_lines(text)),
        score: Some(score),
        outcome: Some(outcome),
    })
}

/// The evidence the gate counts for the rubric, bound to `candidate`.
pub(crate) fn rubric_evidence(
    verdict: &RubricVerdict,
    candidate: &str,
    produced_at: i64,
    duration_ms: u64,
    log_digest: Option<String>,
) -> Evidence {
    let check_verdict = match verdict.outcome {
        None => CheckVerdict::Inconclusive,
        Some(outcome) if outcome.is_pass() => CheckVerdict::Pass,
        Some(_) => CheckVerdict::Fail,
    };
    Evidence {
        artifact_version: candidate.to_string(),
        check_id: RUBRIC_EVIDENCE_ID.to_string(),
        verdict: check_verdict,
        produced_at,
        log_digest,
        exit_code: None,
        duration_ms,
        output_excerpt: cap_chars(&evidence_excerpt(verdict), EXCERPT_CHARS),
        isolated: None,
        screenshots: Vec::new(),
    }
}

/// The summary line, then (when scored) the scores, the parsing layer, the parser's notes and
/// the judge's reason.
fn evidence_excerpt(verdict: &RubricVerdict) -> String {
    let mut lines = vec![verdict.summary()];
    if let Some(score) = &verdict.score {
        if !score.scores.is_empty() {
            let scores: Vec<String> = score
                .scores
                .iter()
                .map(|(name, value)| format!("{name} {value}"))
                .collect();
            lines.push(format!("scores: {}", scores.join(", ")));
        }
        let layer = serde_json::to_value(score.layer)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        lines.push(format!("read from: {layer}"));
        lines.extend(score.notes.iter().map(|n| format!("note: {n}")));
        if !verdict.reason.is_empty() {
            lines.push(format!("reason: {}", verdict.reason));
        }
    }
    lines.join("\n")
}

/// The judge's reason: a `reason` (or synonym) string in a JSON object of the reply (fenced or
/// bare, even one serde cannot read whole), else a `Reason:` line. Capped.
pub(crate) fn judge_reason(text: &str) -> Option<String> {
    json_candidates(text)
        .iter()
        .find_map(|v| reason_in_value(v, 0))
        .or_else(|| reason_after_key(text))
        .or_else(|| reason_line(text))
        .map(|r| cap_chars(r.trim(), MAX_REASON_CHARS))
        .filter(|r| !r.is_empty())
}

/// The first few non-empty lines of the reply, capped.
fn first_lines(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(REASON_FALLBACK_LINES)
        .collect();
    cap_chars(&lines.join("\n"), MAX_REASON_CHARS)
}

/// Fenced blocks, then the span from the first `{` to the last `}`, parsed as JSON.
fn json_candidates(text: &str) -> Vec<Value> {
    let mut spans: Vec<&str> = text
        .split("```")
        .skip(1)
        .step_by(2)
        .map(|block| match block.split_once('\n') {
            // A language tag (`json`) on the fence line.
            Some((tag, rest)) if !tag.trim_start().starts_with(['{', '[']) => rest,
            _ => block,
        })
        .collect();
    if let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) {
        if start < end {
            spans.push(&text[start..=end]);
        }
    }
    spans
        .into_iter()
        .filter_map(|span| serde_json::from_str(span.trim()).ok())
        .collect()
}

fn reason_in_value(value: &Value, depth: usize) -> Option<String> {
    if depth > MAX_REASON_DEPTH {
        return None;
    }
    match value {
        Value::Object(map) => map
            .iter()
            .find_map(|(key, v)| match v {
                Value::String(s) if REASON_KEYS.contains(&normalize_key(key).as_str()) => {
                    Some(s.clone())
                }
                _ => None,
            })
            .or_else(|| map.values().find_map(|v| reason_in_value(v, depth + 1))),
        Value::Array(items) => items.iter().find_map(|v| reason_in_value(v, depth + 1)),
        _ => None,
    }
}

/// `"reason": "..."` in text that is not valid JSON as a whole (trailing commas, comments).
fn reason_after_key(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    REASON_KEYS.iter().find_map(|key| {
        let needle = format!("\"{key}\"");
        let at = lower.find(&needle)? + needle.len();
        let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
        if !rest.starts_with('"') {
            return None;
        }
        // The string literal: up to the first quote not escaped by a backslash.
        let mut escaped = false;
        let end = rest.char_indices().skip(1).find_map(|(i, c)| {
            let closes = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            closes.then_some(i)
        })?;
        serde_json::from_str::<String>(&rest[..=end]).ok()
    })
}

/// `Reason: ...` (also `**Reason:**`, `- Rationale - ...`).
fn reason_line(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.trim().trim_start_matches(['-', '*', '#', ' ']);
        let (label, rest) = line.split_once([':', '-', '—'])?;
        if !REASON_KEYS.contains(&normalize_key(label).as_str()) {
            return None;
        }
        let rest = rest.trim().trim_start_matches(['*', ':', ' ']).trim();
        (!rest.is_empty()).then(|| rest.to_string())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::rubric::{RubricDimension, RubricOutcome, ScoreLayer, Strategy};

    fn rubric() -> Rubric {
        Rubric {
            dimensions: vec![
                RubricDimension {
                    name: "correctness".into(),
                    weight: 2.0,
                    description: String::new(),
                },
                RubricDimension {
                    name: "clarity".into(),
                    weight: 1.0,
                    description: String::new(),
                },
            ],
            threshold: 8.0,
        }
    }

    fn json_reply(correctness: u32, clarity: u32, strategy: &str) -> String {
        format!(
            "Here it is.\n```json\n{{\"scores\": {{\"correctness\": {correctness}, \"clarity\": \
             {clarity}}}, \"strategy\": \"{strategy}\", \"reason\": \"REASON-{strategy}\"}}\n```"
        )
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Want {
        Pass,
        BelowThreshold,
        FinishRefused,
        Pivot,
        NoScore,
    }

    #[test]
    fn verdict_and_evidence_from_a_reply() {
        let cases: Vec<(&str, String, Want, CheckVerdict)> = vec![
            (
                "pass",
                json_reply(9, 8, "FINISH"),
                Want::Pass,
                CheckVerdict::Pass,
            ),
            (
                "below threshold",
                json_reply(7, 9, "REFINE"),
                Want::BelowThreshold,
                CheckVerdict::Fail,
            ),
            (
                "finish refused",
                json_reply(6, 6, "FINISH"),
                Want::FinishRefused,
                CheckVerdict::Fail,
            ),
            (
                "pivot with perfect scores",
                json_reply(10, 10, "PIVOT"),
                Want::Pivot,
                CheckVerdict::Fail,
            ),
            (
                "unparseable",
                "I think it is rather nice.".to_string(),
                Want::NoScore,
                CheckVerdict::Inconclusive,
            ),
        ];
        for (name, reply, want, want_evidence) in cases {
            let verdict = verdict_from_reply(&reply, &rubric())
                .unwrap_or_else(|_| unscored(&rubric(), "no usable score"));
            let got = match verdict.outcome {
                Some(RubricOutcome::Pass) => Want::Pass,
                Some(RubricOutcome::BelowThreshold { .. }) => Want::BelowThreshold,
                Some(RubricOutcome::FinishRefused { .. }) => Want::FinishRefused,
                Some(RubricOutcome::Pivot) => Want::Pivot,
                None => Want::NoScore,
            };
            assert_eq!(got, want, "{name}");
            assert_eq!(verdict.threshold, 8.0, "{name}");
            let evidence = rubric_evidence(&verdict, "snap-1", 42, 7, Some("digest".into()));
            assert_eq!(evidence.verdict, want_evidence, "{name}");
            assert_eq!(evidence.check_id, RUBRIC_EVIDENCE_ID, "{name}");
            assert_eq!(evidence.artifact_version, "snap-1", "{name}");
            assert_eq!(
                (evidence.produced_at, evidence.duration_ms),
                (42, 7),
                "{name}"
            );
            assert_eq!(evidence.exit_code, None, "{name}");
            assert_eq!(evidence.log_digest.as_deref(), Some("digest"), "{name}");
            assert!(
                evidence.output_excerpt.starts_with(&verdict.summary()),
                "{name}: {}",
                evidence.output_excerpt
            );
            if want == Want::NoScore {
                assert!(verdict.score.is_none(), "{name}");
            } else {
                let score = verdict.score.as_ref().unwrap();
                assert_eq!(score.layer, ScoreLayer::Json, "{name}");
                assert!(verdict.reason.starts_with("REASON-"), "{name}");
                assert!(
                    evidence.output_excerpt.contains("read from: json"),
                    "{name}"
                );
                assert!(
                    evidence.output_excerpt.contains("correctness "),
                    "{name}: {}",
                    evidence.output_excerpt
                );
            }
        }
    }

    #[test]
    fn pivot_wins_over_perfect_scores() {
        let verdict = verdict_from_reply(&json_reply(10, 10, "PIVOT"), &rubric()).unwrap();
        assert_eq!(verdict.average(), Some(10.0));
        assert_eq!(verdict.strategy(), Some(Strategy::Pivot));
        assert!(!verdict.passed());
    }

    #[test]
    fn reason_is_found_where_judges_put_it() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                r#"```json
{"scores": {"a": 1}, "reason": "fenced"}
```"#,
                Some("fenced"),
            ),
            (
                r#"Result: {"evaluation": {"Rationale": "nested"}}"#,
                Some("nested"),
            ),
            // Trailing comma: not JSON, the key is still found.
            (
                r#"{"scores": {"a": 1,}, "Reason": "with \"quotes\"",}"#,
                Some("with \"quotes\""),
            ),
            (
                "Scores: a 8/10\n**Reason:** it reads well\n",
                Some("it reads well"),
            ),
            ("- Justification - short and clear", Some("short and clear")),
            ("Correctness: 8/10", None),
            (r#"{"reason": "   "}"#, None),
        ];
        for (text, want) in cases {
            assert_eq!(judge_reason(text).as_deref(), *want, "{text}");
        }
        let long = format!("{{\"reason\": \"{}\"}}", "y".repeat(2000));
        assert_eq!(
            judge_reason(&long).unwrap().chars().count(),
            MAX_REASON_CHARS + 1
        );
    }

    #[test]
    fn without_a_reason_the_first_lines_stand_in() {
        let verdict = verdict_from_reply(
            "\nCorrectness: 9/10\nClarity: 9/10\nStrategy: FINISH\nmore\n",
            &rubric(),
        )
        .unwrap();
        assert_eq!(
            verdict.reason,
            "Correctness: 9/10\nClarity: 9/10\nStrategy: FINISH"
        );
        assert_eq!(
            verdict.score.as_ref().map(|s| s.layer),
            Some(ScoreLayer::DimensionLines)
        );
    }

    #[test]
    fn unscored_verdict_is_inconclusive_evidence() {
        let verdict = unscored(&rubric(), "no auditor model");
        assert!(verdict.score.is_none() && verdict.outcome.is_none());
        let evidence = rubric_evidence(&verdict, "s", 1, 0, None);
        assert_eq!(evidence.verdict, CheckVerdict::Inconclusive);
        assert!(evidence.output_excerpt.contains("no auditor model"));
    }
}
