//! Parsing the auditor LLM's judgment, defensively: a JSON object first (fenced or bare, keys
//! `status`, `integrity`, `contract` or `contract_audit`), then LongHorizon-style control lines
//! (`Status:`, `Integrity:`, `Contract audit:`, tolerant of markdown decoration and case), else
//! `None`. A reply that echoes the template (`complete|incomplete|blocked`) is not an answer.

use serde_json::Value;

use loopgate_protocol::verdict::{AuditStatus, ContractVerdict, Integrity, Verdicts};

use crate::prompt_text::head_chars;

/// Replies longer than this are cut before parsing (a judge should answer in a few lines).
pub(crate) const MAX_REPLY_CHARS: usize = 64 * 1024;
/// At most this many `{` positions are tried as the start of a JSON object.
const MAX_JSON_STARTS: usize = 32;
/// At most this many backcheck lines are kept, each cut to `MAX_BACKCHECK_LINE_CHARS`.
pub(crate) const MAX_BACKCHECK_LINES: usize = 100;
pub(crate) const MAX_BACKCHECK_LINE_CHARS: usize = 300;

/// What the judge said: its three verdicts and its acceptance-constraint backcheck lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuditOpinion {
    pub(crate) verdicts: Verdicts,
    pub(crate) backcheck: Vec<String>,
}

/// Parse a judge reply. `None` when the three verdicts cannot all be read.
pub(crate) fn parse_audit_opinion(reply: &str) -> Option<AuditOpinion> {
    let text = head_chars(reply, MAX_REPLY_CHARS);
    if let Some(opinion) = parse_json_opinion(text) {
        return Some(opinion);
    }
    parse_line_opinion(text)
}

/// Words of a verdict value: split on anything but letters and digits.
fn value_words(value: &str) -> Option<Vec<String>> {
    // A value listing alternatives is the template echoed back, not a choice.
    if value.contains('|') {
        return None;
    }
    let words: Vec<String> = value
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
        .collect();
    (!words.is_empty()).then_some(words)
}

pub(crate) fn parse_status(value: &str) -> Option<AuditStatus> {
    match value_words(value)?.first()?.as_str() {
        "complete" => Some(AuditStatus::Complete),
        "incomplete" => Some(AuditStatus::Incomplete),
        "blocked" => Some(AuditStatus::Blocked),
        _ => None,
    }
}

pub(crate) fn parse_integrity(value: &str) -> Option<Integrity> {
    match value_words(value)?.first()?.as_str() {
        "clean" => Some(Integrity::Clean),
        "suspect" => Some(Integrity::Suspect),
        "violation" => Some(Integrity::Violation),
        _ => None,
    }
}

pub(crate) fn parse_contract(value: &str) -> Option<ContractVerdict> {
    let words = value_words(value)?;
    match words.first()?.as_str() {
        "aligned" => Some(ContractVerdict::Aligned),
        "unknown" => Some(ContractVerdict::Unknown),
        "invalid" => Some(ContractVerdict::Invalid),
        "needsrevision" => Some(ContractVerdict::NeedsRevision),
        "needs" if words.get(1).map(String::as_str) == Some("revision") => {
            Some(ContractVerdict::NeedsRevision)
        }
        _ => None,
    }
}

/// Which control line a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Status,
    Integrity,
    Contract,
    Backcheck,
}

/// Lowercase, decorations removed, `_`/`-`/spaces collapsed to single spaces.
fn normalize_key(raw: &str) -> String {
    raw.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(" ")
}

fn classify_key(raw: &str) -> Option<Key> {
    match normalize_key(raw).as_str() {
        "status" | "audit status" => Some(Key::Status),
        "integrity" => Some(Key::Integrity),
        "contract" | "contract audit" => Some(Key::Contract),
        "acceptance constraint backcheck" | "backcheck" | "acceptance backcheck" => {
            Some(Key::Backcheck)
        }
        _ => None,
    }
}

fn parse_json_opinion(text: &str) -> Option<AuditOpinion> {
    text.match_indices('{')
        .take(MAX_JSON_STARTS)
        .filter_map(|(start, _)| {
            let mut values =
                serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
            match values.next() {
                Some(Ok(Value::Object(map))) => Some(map),
                _ => None,
            }
        })
        .find_map(|map| opinion_from_json(&map))
}

fn opinion_from_json(map: &serde_json::Map<String, Value>) -> Option<AuditOpinion> {
    let (mut status, mut integrity, mut contract) = (None, None, None);
    let mut backcheck = Vec::new();
    for (key, value) in map {
        match (classify_key(key), value) {
            (Some(Key::Status), Value::String(v)) => status = status.or(parse_status(v)),
            (Some(Key::Integrity), Value::String(v)) => {
                integrity = integrity.or(parse_integrity(v))
            }
            (Some(Key::Contract), Value::String(v)) => contract = contract.or(parse_contract(v)),
            (Some(Key::Backcheck), Value::Array(items)) => {
                backcheck = items.iter().filter_map(json_line).collect();
            }
            (Some(Key::Backcheck), Value::Object(entries)) => {
                backcheck = entries
                    .iter()
                    .filter_map(|(id, v)| json_line(v).map(|v| format!("{id}: {v}")))
                    .collect();
            }
            (Some(Key::Backcheck), Value::String(v)) => {
                backcheck = v.lines().filter_map(clean_backcheck_line).collect();
            }
            _ => {}
        }
    }
    Some(AuditOpinion {
        verdicts: Verdicts {
            status: status?,
            integrity: integrity?,
            contract: contract?,
        },
        backcheck: cap_lines(backcheck),
    })
}

fn json_line(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => clean_backcheck_line(s),
        Value::Null => None,
        other => clean_backcheck_line(&other.to_string()),
    }
}

/// Split a control line into (key, value) at its first colon, markdown stripped from the key.
fn split_control_line(line: &str) -> Option<(Key, &str)> {
    let (raw_key, value) = line.split_once(':')?;
    // A key is short: `**Contract audit**` with heading marks and bullets at most.
    if raw_key.chars().count() > 60 {
        return None;
    }
    Some((classify_key(raw_key)?, value))
}

fn is_heading(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

fn parse_line_opinion(text: &str) -> Option<AuditOpinion> {
    let (mut status, mut integrity, mut contract) = (None, None, None);
    let mut backcheck: Option<Vec<String>> = None;
    let mut in_backcheck = false;
    for line in text.lines() {
        let control = split_control_line(line);
        if in_backcheck {
            // The section ends at the next heading or control line.
            let ends = is_heading(line)
                || matches!(
                    control,
                    Some((Key::Status | Key::Integrity | Key::Contract, _))
                );
            if !ends {
                if let (Some(lines), Some(cleaned)) =
                    (backcheck.as_mut(), clean_backcheck_line(line))
                {
                    lines.push(cleaned);
                }
                continue;
            }
            in_backcheck = false;
        }
        match control {
            Some((Key::Status, v)) => status = status.or(parse_status(v)),
            Some((Key::Integrity, v)) => integrity = integrity.or(parse_integrity(v)),
            Some((Key::Contract, v)) => contract = contract.or(parse_contract(v)),
            Some((Key::Backcheck, v)) if backcheck.is_none() => {
                backcheck = Some(clean_backcheck_line(v).into_iter().collect());
                in_backcheck = true;
            }
            _ => {
                // A heading line without a colon, e.g. `## Acceptance-constraint backcheck`.
                if backcheck.is_none() && classify_key(line) == Some(Key::Backcheck) {
                    backcheck = Some(Vec::new());
                    in_backcheck = true;
                }
            }
        }
    }
    Some(AuditOpinion {
        verdicts: Verdicts {
            status: status?,
            integrity: integrity?,
            contract: contract?,
        },
        backcheck: cap_lines(backcheck.unwrap_or_default()),
    })
}

/// A backcheck line without bullets, code fences or surrounding whitespace; `None` if empty.
fn clean_backcheck_line(line: &str) -> Option<String> {
    let trimmed = line
        .trim()
        .trim_start_matches(['-', '*', '+', '>', ' ', '\t'])
        .trim();
    if trimmed.is_empty() || trimmed.starts_with("```") {
        return None;
    }
    Some(head_chars(trimmed, MAX_BACKCHECK_LINE_CHARS).to_string())
}

fn cap_lines(mut lines: Vec<String>) -> Vec<String> {
    lines.truncate(MAX_BACKCHECK_LINES);
    lines
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]
    use super::*;

    fn v(status: AuditStatus, integrity: Integrity, contract: ContractVerdict) -> Option<Verdicts> {
        Some(Verdicts {
            status,
            integrity,
            contract,
        })
    }

    #[test]
    fn parse_table() {
        use AuditStatus::*;
        use ContractVerdict::*;
        use Integrity::*;
        let braces = "{ { { [ } } ".repeat(200);
        let cases: Vec<(&str, &str, Option<Verdicts>)> = vec![
            ("empty", "", None),
            ("garbage", "the weather is nice today; 42 }{ {{ ]", None),
            (
                "plain lines",
                "Status: complete\nIntegrity: clean\nContract audit: aligned\n",
                v(Complete, Clean, Aligned),
            ),
            (
                "markdown bold and case",
                "**Status:** INCOMPLETE\n**Integrity**: Suspect\n- *Contract Audit*: Needs Revision.\n",
                v(Incomplete, Suspect, NeedsRevision),
            ),
            (
                "headings and underscores",
                "### Status: blocked\n## Integrity: violation\n### Contract_audit: needs_revision\n",
                v(Blocked, Violation, NeedsRevision),
            ),
            (
                "bare json",
                r#"{"status": "complete", "integrity": "clean", "contract": "aligned"}"#,
                v(Complete, Clean, Aligned),
            ),
            (
                "fenced json with contract_audit and prose",
                "Here is my verdict:\n```json\n{\"Status\": \"Incomplete\", \"integrity\": \"clean\", \"contract_audit\": \"unknown\"}\n```\nThanks.",
                v(Incomplete, Clean, Unknown),
            ),
            (
                "json with bad values falls back to lines",
                "{\"status\": \"great\", \"integrity\": \"fine\", \"contract\": \"ok\"}\nStatus: incomplete\nIntegrity: clean\nContract audit: invalid",
                v(Incomplete, Clean, Invalid),
            ),
            (
                "template echoed back",
                "Status: complete|incomplete|blocked\nIntegrity: clean|suspect|violation\nContract audit: aligned|unknown|needs_revision|invalid",
                None,
            ),
            ("missing one line", "Status: complete\nIntegrity: clean\n", None),
            (
                "unknown words",
                "Status: maybe\nIntegrity: clean\nContract audit: aligned",
                None,
            ),
            (
                "first occurrence wins",
                "Status: incomplete\nIntegrity: clean\nContract audit: aligned\nStatus: complete",
                v(Incomplete, Clean, Aligned),
            ),
            (
                "json array is not an opinion",
                r#"["complete", "clean", "aligned"]"#,
                None,
            ),
            (
                "many braces of garbage",
                &braces,
                None,
            ),
            (
                "prose before the lines and trailing words",
                "I looked at the evidence.\nStatus: incomplete (one check fails)\nIntegrity: clean - no protected path touched\nContract audit: aligned\n",
                v(Incomplete, Clean, Aligned),
            ),
            (
                "needs-revision hyphenated in json",
                r#"{"status":"incomplete","integrity":"suspect","contract audit":"needs-revision"}"#,
                v(Incomplete, Suspect, NeedsRevision),
            ),
        ];
        for (name, text, want) in cases {
            let got = parse_audit_opinion(text).map(|o| o.verdicts);
            assert_eq!(got, want, "case '{name}'");
        }
    }

    #[test]
    fn backcheck_lines_are_collected() {
        let text = "Status: incomplete\nIntegrity: clean\nContract audit: aligned\n\n\
                    ## Acceptance-constraint backcheck\n- `hello`: pass\n\n- tests: fail (exit 1)\n\n# Notes\nignore me";
        let opinion = parse_audit_opinion(text).unwrap();
        assert_eq!(
            opinion.backcheck,
            vec!["`hello`: pass", "tests: fail (exit 1)"]
        );

        let inline = "Acceptance-constraint backcheck: a: pass\nb: fail\nStatus: complete\nIntegrity: clean\nContract audit: aligned";
        let opinion = parse_audit_opinion(inline).unwrap();
        assert_eq!(opinion.backcheck, vec!["a: pass", "b: fail"]);
        assert_eq!(opinion.verdicts.status, AuditStatus::Complete);
    }

    #[test]
    fn backcheck_from_json_shapes() {
        let arr = r#"{"status":"complete","integrity":"clean","contract":"aligned","backcheck":["a: pass","b: fail"]}"#;
        assert_eq!(
            parse_audit_opinion(arr).unwrap().backcheck,
            vec!["a: pass", "b: fail"]
        );
        let obj = r#"{"status":"complete","integrity":"clean","contract":"aligned","backcheck":{"a":"pass"}}"#;
        assert_eq!(parse_audit_opinion(obj).unwrap().backcheck, vec!["a: pass"]);
    }

    #[test]
    fn huge_reply_is_cut_not_choked_on() {
        let mut text = "Status: complete\nIntegrity: clean\nContract audit: aligned\n".to_string();
        text.push_str(&"x".repeat(MAX_REPLY_CHARS * 2));
        assert!(parse_audit_opinion(&text).is_some());
    }
}
