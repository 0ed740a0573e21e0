//! Time on `loopgate log` and `watch` lines: each entry prefixed with its wall-clock time and
//! its zone (`HH:MM:SS UTC`, from the entry's `at`; `--local`: this machine's offset, e.g.
//! `HH:MM:SS +01:00`), the end of an audit and a round's gate with how
//! long they took (from the audit's dispatch and the round's first step). An episode's own
//! duration is in its `exec_result` headline (`[took N s]`). And a round's transcript
//! (`GET /v1/runs/{id}/rounds/{n}/transcript`) as readable lines. Pure.

use std::collections::HashMap;

use loopgate_api::{Transcript, TranscriptEntry};
use serde_json::Value;

use crate::render::log_line;
use crate::run_view::LogRecord;

/// The zone `log` and `watch` print times in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Zone {
    /// The default.
    #[default]
    Utc,
    /// A fixed offset east of UTC, in seconds (`--local`: this machine's offset when the
    /// command started).
    Offset(i32),
}

impl Zone {
    /// `--local` with the machine's offset (`None`: it could not be read): the zone, and
    /// whether it fell back to UTC.
    pub fn chosen(local: bool, machine_offset: Option<i32>) -> (Zone, bool) {
        match (local, machine_offset) {
            (false, _) => (Zone::Utc, false),
            (true, Some(offset)) => (Zone::Offset(offset), false),
            (true, None) => (Zone::Utc, true),
        }
    }

    /// `UTC`, or the offset as `+01:00` / `-05:30` (an offset of zero is UTC).
    pub fn label(self) -> String {
        match self {
            Zone::Utc | Zone::Offset(0) => "UTC".to_string(),
            Zone::Offset(secs) => {
                let sign = if secs < 0 { '-' } else { '+' };
                let mins = secs.unsigned_abs() / 60;
                format!("{sign}{:02}:{:02}", mins / 60, mins % 60)
            }
        }
    }

    fn offset_ms(self) -> i64 {
        match self {
            Zone::Utc => 0,
            Zone::Offset(secs) => i64::from(secs) * 1000,
        }
    }
}

/// `HH:MM:SS ZONE` of `at_ms` (Unix milliseconds) in `zone`: `01:02:03 UTC`, `02:02:03 +01:00`.
pub fn clock(at_ms: i64, zone: Zone) -> String {
    let secs = at_ms
        .saturating_add(zone.offset_ms())
        .div_euclid(1000)
        .rem_euclid(86_400);
    format!(
        "{:02}:{:02}:{:02} {}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60,
        zone.label()
    )
}

/// `N.N s` of a span in milliseconds.
pub fn span(ms: i64) -> String {
    format!("{:.1} s", ms.max(0) as f64 / 1000.0)
}

/// Remembers when each round and audit began, across the entries of one log.
#[derive(Debug, Default)]
pub struct LogClock {
    zone: Zone,
    round_start: HashMap<(u64, u64), i64>,
    audit_start: HashMap<(u64, u64), i64>,
}

impl LogClock {
    /// A clock printing times in `zone`.
    pub fn new(zone: Zone) -> Self {
        LogClock {
            zone,
            ..LogClock::default()
        }
    }

    /// `HH:MM:SS ZONE [round N] headline`, with ` (audit took ...)` / ` (round took ...)` where
    /// the entry ends one.
    pub fn line(&mut self, record: &LogRecord) -> String {
        let raw = &record.raw;
        let num = |key: &str| raw.get(key).and_then(Value::as_u64).unwrap_or(0);
        let at = raw.get("at").and_then(Value::as_i64).unwrap_or(0);
        let key = (num("generation"), num("round"));
        let mut suffix = String::new();
        match raw.get("type").and_then(Value::as_str).unwrap_or("") {
            "decision" | "exec_dispatched" | "clause_step" | "goal_step" => {
                self.round_start.entry(key).or_insert(at);
            }
            "audit_dispatched" => {
                self.audit_start.insert(key, at);
            }
            "audit_report" => {
                if let Some(start) = self.audit_start.remove(&key) {
                    suffix = format!(" (audit took {})", span(at - start));
                }
            }
            "gate" => {
                if let Some(start) = self.round_start.get(&key) {
                    suffix = format!(" (round took {})", span(at - start));
                }
            }
            _ => {}
        }
        format!("{} {}{suffix}", clock(at, self.zone), log_line(record))
    }
}

/// A round's transcript as lines: a header, then each entry at its time since the episode
/// started, texts indented.
pub fn transcript_lines(t: &Transcript) -> Vec<String> {
    let mut lines = vec![format!(
        "transcript of round {} (generation {}, attempt {}) by {} with {}: {} entries{}",
        t.round,
        t.generation,
        t.attempt.max(1),
        t.worker,
        if t.profile.is_empty() {
            "?"
        } else {
            &t.profile
        },
        t.entries.len(),
        if t.omitted > 0 {
            format!(", {} more left out (size bound)", t.omitted)
        } else {
            String::new()
        }
    )];
    let indent = |text: &str| -> Vec<String> { text.lines().map(|l| format!("    {l}")).collect() };
    for e in &t.entries {
        match e {
            TranscriptEntry::ModelTurn {
                at_ms,
                turn,
                text,
                tokens,
            } => {
                lines.push(format!(
                    "[+{}] turn {turn}: model ({tokens} tokens)",
                    span(*at_ms as i64)
                ));
                lines.extend(indent(text));
            }
            TranscriptEntry::ToolCall {
                at_ms,
                turn,
                tool,
                arguments,
            } => {
                lines.push(format!(
                    "[+{}] turn {turn}: call {tool} {arguments}",
                    span(*at_ms as i64)
                ));
            }
            TranscriptEntry::ToolResult {
                at_ms,
                turn,
                tool,
                ok,
                result,
            } => {
                lines.push(format!(
                    "[+{}] turn {turn}: {tool} {}",
                    span(*at_ms as i64),
                    if *ok { "returned" } else { "failed" }
                ));
                lines.extend(indent(result));
            }
            TranscriptEntry::SelfCheckRefusal { at_ms, turn, text } => {
                lines.push(format!(
                    "[+{}] turn {turn}: self-check refused finish",
                    span(*at_ms as i64)
                ));
                lines.extend(indent(text));
            }
            TranscriptEntry::Output { at_ms, text } => {
                lines.push(format!("[+{}] {text}", span(*at_ms as i64)));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn clock_and_span() {
        let cases = [
            (0, Zone::Utc, "00:00:00 UTC"),
            (1_500, Zone::Utc, "00:00:01 UTC"),
            (3_723_000, Zone::Utc, "01:02:03 UTC"),
            (86_400_000 + 61_000, Zone::Utc, "00:01:01 UTC"),
            (3_723_000, Zone::Offset(3600), "02:02:03 +01:00"),
            (3_723_000, Zone::Offset(0), "01:02:03 UTC"),
            // West of UTC: the day before.
            (3_723_000, Zone::Offset(-5 * 3600 - 1800), "19:32:03 -05:30"),
            (
                86_399_000,
                Zone::Offset(13 * 3600 + 45 * 60),
                "13:44:59 +13:45",
            ),
        ];
        for (at, zone, want) in cases {
            assert_eq!(clock(at, zone), want, "{at} {zone:?}");
        }
        assert_eq!(span(61_060), "61.1 s");
        assert_eq!(span(-5), "0.0 s");
    }

    #[test]
    fn lines_carry_time_and_durations() {
        let mut c = LogClock::default();
        let mut line = |v: Value| c.line(&LogRecord::from_value(v));
        let snap = "a".repeat(64);
        assert_eq!(
            line(
                json!({"at": 10_000, "generation": 1, "round": 1, "type": "exec_dispatched",
                "capability": "cli", "objective": "write it", "base_snapshot": snap})
            ),
            "00:00:10 UTC [round 1] executor (cli) dispatched: write it"
        );
        line(
            json!({"at": 20_000, "generation": 1, "round": 1, "type": "audit_dispatched",
            "purpose": "round", "candidate": snap}),
        );
        assert!(line(
            json!({"at": 23_500, "generation": 1, "round": 1, "type": "audit_report",
            "purpose": "round", "worker": "a", "snapshot": snap,
            "verdicts": {"status": "complete", "integrity": "clean", "contract": "aligned"},
            "passing": 1, "checked": 1, "gaps": [], "downgraded": false})
        )
        .ends_with("checks 1/1 passing (audit took 3.5 s)"));
        assert_eq!(
            line(
                json!({"at": 24_000, "generation": 1, "round": 1, "type": "gate", "passed": true,
                "snapshot": snap, "reasons": []})
            ),
            "00:00:24 UTC [round 1] gate: open on snapshot aaaaaaaaaaaa (round took 14.0 s)"
        );
        let mut local = LogClock::new(Zone::Offset(-3600));
        assert_eq!(
            local.line(&LogRecord::from_value(
                json!({"at": 10_000, "generation": 1,
                "round": 1, "type": "exec_dispatched", "capability": "cli",
                "objective": "write it", "base_snapshot": snap})
            )),
            "23:00:10 -01:00 [round 1] executor (cli) dispatched: write it"
        );
    }

    /// `--local` takes the machine's offset, or says it fell back to UTC.
    #[test]
    fn the_zone_chosen() {
        let cases = [
            (false, Some(3600), (Zone::Utc, false)),
            (false, None, (Zone::Utc, false)),
            (true, Some(3600), (Zone::Offset(3600), false)),
            (true, None, (Zone::Utc, true)),
        ];
        for (local, offset, want) in cases {
            assert_eq!(Zone::chosen(local, offset), want, "{local} {offset:?}");
        }
    }

    #[test]
    fn a_transcript_reads_as_lines() {
        let t: Transcript = serde_json::from_value(json!({
        "run_id": "r", "generation": 1, "round": 2, "attempt": 1, "worker": "exec-1",
        "profile": "exec", "omitted": 0, "entries": [
            {"type": "model_turn", "at_ms": 1200, "turn": 1, "text": "Writing it.", "tokens": 30},
            {"type": "tool_call", "at_ms": 1300, "turn": 1, "tool": "write_file",
             "arguments": "{\"path\":\"a.txt\"}"},
            {"type": "tool_result", "at_ms": 1400, "turn": 1, "tool": "write_file",
             "ok": true, "result": "wrote a.txt\n(3 bytes)"},
            {"type": "self_check_refusal", "at_ms": 2000, "turn": 2, "text": "check 'a' fails"},
            {"type": "output", "at_ms": 2500, "text": "{\"type\":\"result\"}"}
        ]}))
        .unwrap();
        assert_eq!(
            transcript_lines(&t),
            vec![
                "transcript of round 2 (generation 1, attempt 1) by exec-1 with exec: 5 entries",
                "[+1.2 s] turn 1: model (30 tokens)",
                "    Writing it.",
                "[+1.3 s] turn 1: call write_file {\"path\":\"a.txt\"}",
                "[+1.4 s] turn 1: write_file returned",
                "    wrote a.txt",
                "    (3 bytes)",
                "[+2.0 s] turn 2: self-check refused finish",
                "    check 'a' fails",
                "[+2.5 s] {\"type\":\"result\"}",
            ]
        );
    }
}
